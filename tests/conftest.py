"""Shared fixtures: one local Ray per test session, the data folder, and markers for optional parts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.process_cpu import cpu_used, tree_cpu

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

REPO = Path(__file__).resolve().parent.parent
# This repository's tests read the data sets laid beside the checkout. Their cache is the user's, as the commands'
# ($PCR_RAY_CACHE, else ~/.cache/pcr_ray): what they train or convert (the quick PRMs, ONNX exports, model folders)
# is keyed by what determines it and built once per machine, shared by every checkout and by `pcr-ray solve`.
os.environ.setdefault("PCR_RAY_DATA", str(REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole test session (num_cpus=2, dashboard off); shut down at the end."""
    import ray

    from pcr_ray.pipeline.ray_runtime import set_local_ray_env

    if not ray.is_initialized():
        set_local_ray_env()  # as `pcr-ray` starts a local Ray
        # the workers inherit this process's environment (HF_HUB_OFFLINE, TOKENIZERS_PARALLELISM above); no
        # runtime env, which would start each worker through Ray's setup_worker.py
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def heavy_memory():
    """The test needs several GB of its own: it runs while no other such test of either suite runs
    (tests/memory_lock.py)."""
    from tests.memory_lock import heavy_memory as hold

    with hold():
        yield


@pytest.fixture(scope="session")
def data_dir() -> Path:
    from pcr_ray.paths import data_dir as _data_dir

    d = _data_dir()
    if not (d / "gsm8k" / "test.jsonl").exists():
        pytest.skip(f"data sets not found in {d} (set PCR_RAY_DATA)")
    return d


# Actors a test module may not leave behind: the pipeline's named actors and Ray Train's controller.
LEAK_CLASSES = ("TrainController", "DatasetManager")
LEAK_PREFIX = "pcr-"


def alive_actors() -> list[dict]:
    """ALIVE actors of the session's Ray: {'id', 'name', 'class', 'pid'} each."""
    import ray
    from ray._private import state  # the GCS actor table: works without the dashboard (off in tests)

    if not ray.is_initialized():
        return []
    return [{"id": a["ActorID"], "name": a.get("Name") or "", "class": a.get("ActorClassName") or "",
             "pid": a.get("Pid")} for a in state.actors().values() if a.get("State") == "ALIVE"]


def leaked(actors: list[dict], before: set[str]) -> list[dict]:
    """The actors of `actors` made since `before` that are pcr_ray's or Ray Train's."""
    return [a for a in actors if a["id"] not in before and (
        a["name"].startswith(LEAK_PREFIX) or a["class"].rsplit(".", 1)[-1] in LEAK_CLASSES)]


def stop_actors(actors: list[dict]) -> None:
    """ray.kill the named ones (in whatever namespace), SIGKILL the rest by their pid."""
    import contextlib
    import signal

    import ray

    spaces = {n["name"]: n["namespace"] for n in ray.util.list_named_actors(all_namespaces=True)}
    for a in actors:
        with contextlib.suppress(Exception):
            if a["name"] in spaces:
                ray.kill(ray.get_actor(a["name"], namespace=spaces[a["name"]]))
            elif a["pid"]:
                os.kill(int(a["pid"]), signal.SIGKILL)


@pytest.fixture(autouse=True, scope="module")
def no_actor_outlives_its_module(request):
    """Fails the module whose tests leave a pcr_ray actor or a Ray Train controller alive (and stops them, so the
    next module starts clean). Module scope: a module may share an actor between its tests (the vLLM engine). The
    model actors an in-process `evaluate` keeps for a next run (pcr_ray.pipeline.actors) are released first, as a
    driver's end releases them: what is left after that escaped the driver's bookkeeping."""
    import time

    before = {a["id"] for a in alive_actors()}
    yield
    if "pcr_ray.pipeline.actors" in sys.modules:  # the model actors an in-process evaluate keeps for its next run
        sys.modules["pcr_ray.pipeline.actors"].release_all()
    deadline = time.monotonic() + 10  # a released actor takes a moment to die
    while (left := leaked(alive_actors(), before)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if left:
        stop_actors(left)
        pytest.fail(f"{request.module.__name__} left actors alive: "
                    + ", ".join(f"{a['class']} {a['name']}".strip() for a in left), pytrace=False)


# The modules that take longest, slowest first (make test's durations on 2 cores): under pytest-xdist they are handed
# out first, so that the two workers finish together. The module times `make test` measured last (kept in pytest's
# cache by the controller) order the next run; this list orders a fresh checkout's.
SLOW_MODULES = ("tests/test_experiments.py", "tests/test_prm_ray.py", "tests/test_reproduce.py", "tests/test_sft.py",
                "tests/test_pipeline.py", "tests/test_node_loss.py", "tests/test_benchmarks.py",
                "tests/test_pipeline_kill_resume.py",
                "tests/test_prm_mine.py", "tests/test_serve.py", "tests/test_prm_train.py", "tests/test_data_files.py")
MODULE_SECONDS_KEY = "pcr_ray/module_seconds"


def pytest_collection_modifyitems(config, items):
    """The modules slowest first, each module's tests in their order. Under pytest-xdist as `make test` runs it
    (Makefile XDIST: `--dist loadscope --no-loadscope-reorder`) a module's tests stay on one worker (its module
    fixtures, the worker's local Ray, are built once) and the modules are handed out in this order
    (longest-processing-time first: the workers end together)."""
    by_module: dict[str, list] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    measured = cache.get(MODULE_SECONDS_KEY, {}) if cache is not None else {}

    def expected(module: str) -> float:
        if measured:
            return float(measured.get(module, 0.0))
        return float(len(SLOW_MODULES) - SLOW_MODULES.index(module)) if module in SLOW_MODULES else 0.0

    order = sorted(by_module, key=lambda m: -expected(m))  # stable: unmeasured modules keep their order
    items[:] = [item for m in order for item in by_module[m]]


# `make test` sets PCR_RAY_DURATIONS: each test's time (setup + call + teardown) and the CPU seconds its process
# tree used (the test process, its local Ray, its subprocesses: tests/process_cpu.py, a lower bound) are appended
# there, and tests/budget.py prints the whole run's wall time against its budget and the costliest tests of both
# suites. Wall time on a machine both suites keep busy says little of a test's cost; its CPU seconds add up.
_DURATIONS: dict[str, float] = {}
_CPU: dict[str, float] = {}
_CPU_START = pytest.StashKey[dict]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if os.environ.get("PCR_RAY_DURATIONS"):
        item.stash[_CPU_START] = tree_cpu(os.getpid())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown" and _CPU_START in item.stash:
        used = cpu_used(item.stash[_CPU_START], tree_cpu(os.getpid()))
        outcome.get_result().user_properties.append(("cpu_s", used))


def pytest_runtest_logreport(report):
    _DURATIONS[report.nodeid] = _DURATIONS.get(report.nodeid, 0.0) + float(report.duration)
    for key, value in report.user_properties:
        if key == "cpu_s":
            _CPU[report.nodeid] = float(value)


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("PCR_RAY_DURATIONS")
    if out and _DURATIONS and not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller has every worker's
        import json

        if getattr(session.config, "cache", None) is not None:  # module times, for the next run (whole runs only)
            ran: dict[str, float] = {}
            for node, secs in _DURATIONS.items():
                ran[node.split("::", 1)[0]] = ran.get(node.split("::", 1)[0], 0.0) + secs
            known = dict(session.config.cache.get(MODULE_SECONDS_KEY, {}))
            session.config.cache.set(MODULE_SECONDS_KEY, {**known, **{m: round(t, 1) for m, t in ran.items()}})
        with open(out, "a", encoding="utf-8") as fh:
            for node, secs in _DURATIONS.items():
                cpu = {"cpu_s": round(_CPU[node], 2)} if node in _CPU else {}
                fh.write(json.dumps({"test": node, "seconds": round(secs, 2), **cpu}) + "\n")
