"""make test's own helpers: the cache warm-up before the suites (tests/warm_cache.py) and the budget report."""

from __future__ import annotations

import json
from pathlib import Path

from tests import budget, warm_cache

REPO = Path(__file__).resolve().parent.parent


def test_warm_cache_records_each_build_and_a_failure_does_not_stop_the_others(monkeypatch, tmp_path, capsys):
    built: list[str] = []

    def ok(name: str):
        def build() -> Path:
            built.append(name)
            return tmp_path / name
        return build

    def broken() -> Path:
        raise RuntimeError("no GGUF found")

    monkeypatch.setattr(warm_cache, "ARTIFACTS", {"a": ok("a"), "broken": broken, "b": ok("b")})
    durations = tmp_path / "d.jsonl"
    assert warm_cache.warm(durations) == 1
    assert built == ["a", "b"]
    rows = [json.loads(line) for line in durations.read_text().splitlines()]
    assert [r["test"] for r in rows] == ["warm-cache::a", "warm-cache::b"]
    assert "broken failed: RuntimeError: no GGUF found" in capsys.readouterr().err
    monkeypatch.setattr(warm_cache, "ARTIFACTS", {"a": ok("a")})
    assert warm_cache.warm(None) == 0


def test_the_budget_report_names_the_overrun_and_the_slowest(tmp_path):
    durations = tmp_path / "d.jsonl"
    durations.write_text("".join(json.dumps({"test": f"t{i}", "seconds": float(i)}) + "\n" for i in range(12)))
    text = budget.report(durations, start=0.0, now=budget.FRESH_BUDGET_S + 120.0, top=3)
    assert "over the fresh-machine budget by 2.0 min" in text
    assert text.splitlines()[-3:] == ["      11.0 s  t11", "      10.0 s  t10", "       9.0 s  t9"]
    assert "over" not in budget.report(durations, start=0.0, now=60.0)
    # the tests that used the most CPU, where recorded (warm-cache builds record wall time only)
    durations.write_text(json.dumps({"test": "build", "seconds": 50.0}) + "\n" + "".join(
        json.dumps({"test": f"t{i}", "seconds": 1.0, "cpu_s": 10.0 * i}) + "\n" for i in range(4)))
    text = budget.report(durations, start=0.0, now=60.0, top=2)
    assert "the 2 tests that used the most CPU (1.0 CPU-min in 4 tests):" in text
    assert text.splitlines()[-2:] == ["      30.0 CPU-s  t3", "      20.0 CPU-s  t2"]


def test_a_process_trees_cpu_counts_its_subprocesses():
    """cpu_used: a child busy for a while is counted in its parent's tree (once reaped, in the parent's); a process
    gone from the tree never counts negatively."""
    import os
    import subprocess
    import sys

    from tests.process_cpu import cpu_used, tree_cpu

    before = tree_cpu(os.getpid())
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    subprocess.run([sys.executable, "-c", busy], check=True)
    assert cpu_used(before, tree_cpu(os.getpid())) >= 0.45
    assert tree_cpu(2**22 + 1) == {}  # no such process
    assert cpu_used({1: 5.0, 2: 9.0}, {1: 6.5, 3: 1.0}) == 2.5  # 2 ended unreaped: not counted, not subtracted


def test_modules_are_handed_out_slowest_first():
    """The xdist order (tests/conftest.py): by the module times measured last, else by SLOW_MODULES; unknown modules
    in collection order; each module's tests stay in their order."""
    from types import SimpleNamespace

    from tests import conftest

    ids = ["tests/test_a.py::t1", "tests/test_prm_ray.py::t1", "tests/test_a.py::t2", "tests/test_b.py::t1",
           "tests/test_experiments.py::t1", "tests/test_prm_ray.py::t2"]

    def order(measured: dict[str, float] | None) -> list[str]:
        items = [SimpleNamespace(nodeid=i) for i in ids]
        cache = None if measured is None else SimpleNamespace(get=lambda key, default: measured)
        conftest.pytest_collection_modifyitems(SimpleNamespace(cache=cache), items)
        return [it.nodeid for it in items]

    assert order(None) == ["tests/test_experiments.py::t1", "tests/test_prm_ray.py::t1", "tests/test_prm_ray.py::t2",
                           "tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_b.py::t1"]
    assert order({"tests/test_b.py": 500.0, "tests/test_a.py": 1.0}) == [
        "tests/test_b.py::t1", "tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_prm_ray.py::t1",
        "tests/test_prm_ray.py::t2", "tests/test_experiments.py::t1"]


def test_make_tests_xdist_keeps_each_module_on_one_worker(tmp_path):
    """pytest-xdist run with the Makefile's XDIST flags, on three modules of four tests: each module's tests all
    ran on one worker (a module fixture, the worker's Ray, is built once) and both workers ran some."""
    import re
    import subprocess
    import sys

    flags = re.search(r"^XDIST := (.+)$", (REPO / "Makefile").read_text(), re.M).group(1).split()
    for m in "abc":
        (tmp_path / f"test_{m}.py").write_text(
            "import os\n" + "".join(
                f"def test_{i}():\n    open('{tmp_path}/ran_{m}{i}', 'w').write(os.environ['PYTEST_XDIST_WORKER'])\n"
                for i in range(4)))
    proc = subprocess.run([sys.executable, "-m", "pytest", *flags, "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    workers = {m: {(tmp_path / f"ran_{m}{i}").read_text() for i in range(4)} for m in "abc"}
    assert all(len(w) == 1 for w in workers.values()), workers
    assert len(set().union(*workers.values())) == 2, workers
