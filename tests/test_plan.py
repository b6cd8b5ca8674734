"""The resource plan (`pcr-ray plan`): pools from configs, placement like Ray's, the shipped experiments against the
shipped cluster configs, and a job that cannot fit failing at once with what does not fit."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pcr_ray.configs import to_plain
from pcr_ray.evaluate import compose_config
from pcr_ray.paths import conf_dir
from pcr_ray.pipeline.node_sandbox import format_sandbox
from pcr_ray.pipeline.plan import (
    SHAPES,
    Node,
    PlanError,
    Pool,
    advice,
    check_cluster,
    fit_auto,
    format_plan,
    launcher_nodes,
    main,
    place,
    planned_replicas,
    pools,
    rayjob_nodes,
    show_plan,
)

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = sorted(p.stem for p in (conf_dir() / "experiment").glob("*.yaml"))


def _cfg(*overrides: str) -> dict:
    return to_plain(compose_config(list(overrides)))


def test_pools_of_the_paper_table():
    by_role = {p.role: p for p in pools(_cfg("experiment=paper_table"))}
    gen, prm, workers = by_role["generator:default"], by_role["prm:default"], by_role["search_workers"]
    assert (gen.replicas, gen.gpus, gen.cpus, gen.gpu_memory) == (2, 0.88, 2.0, 0.85)
    assert (prm.replicas, prm.gpus) == (1, 0.12)
    assert (workers.replicas, workers.cpus) == (32, 0.5)
    # the enumerator runs inside the search workers: no generator pool; verifier_only alone needs no PRM
    roles = {p.role for p in pools(_cfg("experiment=smoke", "methods=[verifier_only]"))}
    assert roles == {"search_workers"}


def test_placement_follows_rays_rules():
    one = (Node("n", 8, 1),)
    # two whole-GPU engines cannot share one GPU; two halves can
    assert not place([Pool("e", 2, 1, 1.0)], one).fits
    assert place([Pool("e", 2, 1, 0.5)], one).fits
    # a tensor-parallel engine's GPUs are on one node
    two = (Node("a", 8, 1), Node("b", 8, 1))
    tp2 = place([Pool("e", 1, 1, 2.0, tp=2)], two)
    assert not tp2.fits and "on one node" in tp2.unplaced[0][2]
    assert place([Pool("e", 1, 1, 2.0, tp=2)], (Node("a", 8, 2),)).fits
    # the memory shares of the actors on one device add up
    over = place([Pool("e", 1, 1, 0.8, gpu_memory=0.9), Pool("p", 1, 1, 0.2, gpu_memory=0.2)], one)
    assert over.memory_over and not over.fits
    # CPUs: what the model actors leave is what the search workers get
    short = place([Pool("e", 1, 6, 1.0), Pool("search_workers", 4, 1)], one)
    assert len(short.unplaced) == 2 and any("pipeline.num_search_workers=2" in t
                                            for t in advice([Pool("e", 1, 6, 1.0), Pool("search_workers", 4, 1)],
                                                            one, short))


def test_the_old_paper_table_asked_more_gpus_than_its_cluster_has_and_the_advice_fixes_it():
    nodes = rayjob_nodes(REPO / "cluster" / "rayjob.yaml")
    old = _cfg("experiment=paper_table", "actors.generator.num_gpus=1", "actors.prm.num_gpus=0.25")
    pl = place(pools(old), nodes)
    assert not pl.fits and pl.unplaced[0][0].role == "prm:default"
    text = format_plan(pools(old), nodes, pl)
    assert "DOES NOT FIT" in text and "prm:default" in text
    tip = next(t for t in advice(pools(old), nodes, pl) if t.startswith("actors.generator.num_gpus="))
    fixed = _cfg("experiment=paper_table", *tip.split(":")[0].split(), "actors.prm.num_gpus=0.25")
    assert place(pools(fixed), nodes).fits, tip


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_shipped_experiment_fits_the_shipped_clusters(experiment):
    """GPU experiments against cluster/rayjob.yaml and cluster/cluster.yaml (at their minimum size: the job must
    start without waiting for an autoscaler); CPU experiments against a 2-core laptop."""
    cfg = _cfg(f"experiment={experiment}")
    pool_list = pools(cfg)
    if any(p.gpus for p in pool_list):
        for nodes in (rayjob_nodes(REPO / "cluster" / "rayjob.yaml"),
                      launcher_nodes(REPO / "cluster" / "cluster.yaml", workers="min")):
            pl = place(pool_list, nodes)
            assert pl.fits, format_plan(pool_list, nodes, pl)
    else:
        laptop = (Node("laptop", 2, 0),)
        pl = place(pool_list, laptop)
        assert pl.fits, format_plan(pool_list, laptop, pl)


def test_shipped_cluster_configs_read_as_shapes():
    job = rayjob_nodes(REPO / "cluster" / "rayjob.yaml")
    assert [(n.cpus, n.gpus) for n in job] == [(16, 0), (8, 1), (8, 1)]
    assert [(n.cpus, n.gpus) for n in job] == [(n.cpus, n.gpus) for n in SHAPES["two_nodes_one_gpu"]]
    launcher = launcher_nodes(REPO / "cluster" / "cluster.yaml", workers="min")
    assert launcher[0].gpus == 0 and sum(n.gpus for n in launcher) >= 2


def test_auto_replicas_are_as_many_as_fit_beside_the_other_actors():
    auto = _cfg("experiment=paper_table", "actors.generator.replicas=auto", "actors.prm.replicas=auto")
    asked = pools(auto)
    assert [p.replicas for p in asked if p.auto] == [1, 1]
    # two one-GPU workers: an engine (0.88) on each, then a PRM (0.12) beside each
    two = fit_auto(asked, SHAPES["two_nodes_one_gpu"])
    assert planned_replicas(two) == {"generator": 2, "prm": 2} and place(two, SHAPES["two_nodes_one_gpu"]).fits
    # eight GPUs on one node: eight engines; their CPUs (2 each) and the 32 search workers' (0.5) fit the 96 CPUs
    eight = fit_auto(asked, SHAPES["one_node_eight_gpus"])
    assert planned_replicas(eight) == {"generator": 8, "prm": 8}
    # tensor-parallel engines of 2 whole GPUs: three on eight GPUs, the PRM's share taking a part of the fourth
    # pair; none fits two 1-GPU nodes (one is planned, and that plan does not fit: the run waits or refuses)
    tp = pools(_cfg("experiment=paper_table", "actors.generator.replicas=auto", "generator.tensor_parallel_size=2"))
    assert planned_replicas(fit_auto(tp, SHAPES["one_node_eight_gpus"])) == {"generator": 3, "prm": 1}
    one = fit_auto(tp, SHAPES["two_nodes_one_gpu"])
    assert planned_replicas(one)["generator"] == 1 and not place(one, SHAPES["two_nodes_one_gpu"]).fits
    # CPU actors count CPUs: what the search workers leave
    cpu = fit_auto([Pool("prm:default", 1, 2.0, auto=True), Pool("search_workers", 4, 1.0)], (Node("n", 16, 0),))
    assert planned_replicas(cpu) == {"prm": 6}
    # a fixed count stays as asked
    assert planned_replicas(fit_auto(pools(_cfg("experiment=paper_table")), SHAPES["one_node_eight_gpus"])) == {
        "generator": 2, "prm": 1}


def test_auto_needs_something_to_count_and_a_count_is_at_least_one():
    with pytest.raises(ValueError, match="replicas=auto counts the replicas that fit"):
        pools(_cfg("experiment=smoke", "actors.generator.placement=actor", "actors.generator.replicas=auto"))
    for bad in ("0", "many"):
        with pytest.raises(ValueError, match="actors.prm.replicas must be a count of at least 1 or auto"):
            pools(_cfg("experiment=smoke", f"actors.prm.replicas={bad}"))


def test_plan_command_prints_every_shape_and_exits_by_fit(capsys):
    assert main(["experiment=paper_table", "--shape", "two_nodes_one_gpu"]) == 0
    out = capsys.readouterr().out
    assert "== two_nodes_one_gpu" in out and "fits" in out and "gpu-worker-1 GPU 0" in out
    assert main(["experiment=paper_table", "--shape=one_gpu"]) == 1
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out and "actors.generator.replicas=1" in out
    assert main(["experiment=paper_table"]) == 1  # one_gpu does not fit
    out = capsys.readouterr().out
    assert all(f"== {s}" in out for s in SHAPES)
    assert main(["experiment=paper_table", "actors.generator.replicas=auto", "--shape", "one_node_eight_gpus"]) == 0
    assert "generator:default      8 (auto) x (2 CPU, 0.88 GPU" in capsys.readouterr().out
    assert main(["--shape", "nine_gpus"]) == 2
    assert main(["--help"]) == 0


@pytest.mark.ray
def test_a_job_that_cannot_fit_the_cluster_fails_at_once_naming_what(ray_session, monkeypatch):
    """The session's Ray has 2 CPUs and no GPU: an evaluation whose generator actor asks a GPU fails before any
    actor starts, within the wait it was given, and says which pool, what it asked and what the cluster has."""
    from pcr_ray.pipeline import plan

    asked: list = []
    monkeypatch.setattr(plan, "request_demand", asked.append)
    cfg = _cfg("generator=llamacpp", "actors.generator.num_gpus=1", "methods=[nsprm]", "ray.num_cpus=2")
    t0 = time.monotonic()
    with pytest.raises(PlanError) as err:
        check_cluster(cfg, wait_s=0)
    assert time.monotonic() - t0 < 30
    assert asked == []  # no wait (ray.wait_for_nodes_s=0): refused at once, nothing asked of an autoscaler
    msg = str(err.value)
    assert "generator:default" in msg and "1 GPU" in msg and "0 GPU" in msg and "DOES NOT FIT" in msg
    assert check_cluster(_cfg("experiment=smoke", "pipeline.num_search_workers=2"), wait_s=0).fits


def test_the_sandbox_section_refuses_only_a_run_that_needs_it():
    problems = {"10.0.0.1/ab12cd": "", "10.0.0.2/ef34gh": "bubblewrap (/usr/bin/bwrap) cannot start a sandbox here: x"}
    text, ok = format_sandbox(problems, needed=True)
    assert not ok and "10.0.0.1/ab12cd: works" in text and "10.0.0.2/ef34gh: bubblewrap" in text
    assert "DOES NOT RUN pyexec" in text
    text, ok = format_sandbox(problems, needed=False)
    assert ok and "pyexec is not run" in text and "DOES NOT" not in text
    assert format_sandbox({"10.0.0.1/ab12cd": ""}, needed=True)[1]


def test_the_cluster_files_let_bubblewrap_run_in_every_container():
    """Every pod of the RayJob (the head hosts search workers too) and the launcher's Docker containers carry what
    bubblewrap needs: user namespaces (seccomp), mounts (AppArmor) and a /proc of its own (docs/cluster.md)."""
    import yaml

    spec = yaml.safe_load((REPO / "cluster" / "rayjob.yaml").read_text())["spec"]["rayClusterSpec"]
    pods = [spec["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in spec["workerGroupSpecs"]]
    for pod in pods:
        assert pod["hostUsers"] is False  # procMount: Unmasked is allowed only in a user-namespaced pod
        for c in pod["containers"]:
            assert c["securityContext"] == {"seccompProfile": {"type": "Unconfined"},
                                            "appArmorProfile": {"type": "Unconfined"}, "procMount": "Unmasked"}
    opts = yaml.safe_load((REPO / "cluster" / "cluster.yaml").read_text())["docker"]["run_options"]
    assert {f"--security-opt {o}=unconfined" for o in ("seccomp", "apparmor", "systempaths")} <= set(opts)


@pytest.mark.ray
def test_the_plan_against_a_running_cluster_reports_each_nodes_sandbox(ray_session, capsys):
    """`pcr-ray plan --address`: the session's Ray (one node with bubblewrap) probed by a task on the node."""
    if not show_plan(pools(_cfg("experiment=smoke", "pipeline.num_search_workers=2")), None, "auto", sandbox=True):
        pytest.fail(capsys.readouterr().out)
    out = capsys.readouterr().out
    assert "== the cluster at auto" in out and "fits" in out
    section = out[out.index("== the pyexec sandbox"):].splitlines()
    assert len(section) == 2 and section[1].endswith(": works"), section


def _requested() -> list[dict[str, float]]:
    """The resource request Ray's autoscaler reads (the bundles `ray status -v` lists under `From
    request_resources:` at the autoscaler monitor's next report, which lags by a minute or more under load)."""
    from ray._private.ray_constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.autoscaler.v2.utils import is_autoscaler_v2
    from ray.experimental.internal_kv import _internal_kv_get

    assert not is_autoscaler_v2(), "the local Ray runs autoscaler v2: read its cluster resource constraints instead"
    return json.loads(_internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL) or b"[]")


@pytest.mark.ray
def test_a_job_waiting_for_nodes_asks_the_autoscaler_for_its_plan(ray_session):
    """While an evaluation waits for nodes (ray.wait_for_nodes_s), its whole plan is a pending demand Ray's
    autoscaler reads (`ray status -v` shows it), so an autoscaling cluster adds the node; the request ends with the
    wait."""
    import threading

    cfg = _cfg("generator=llamacpp", "actors.generator.num_gpus=1", "methods=[nsprm]", "ray.num_cpus=2",
               "pipeline.num_search_workers=1", "pipeline.worker_num_cpus=1")
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            check_cluster(cfg, wait_s=20, poll_s=0.5)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    deadline, requested = time.monotonic() + 15, []
    while time.monotonic() < deadline and not requested:
        time.sleep(0.2)
        requested = _requested()
    t.join(timeout=60)
    # one bundle per replica of each pool: the generator actor's GPU, the search worker's CPU
    assert sorted(requested, key=str) == [{"CPU": 1.0}, {"GPU": 1.0}], requested
    assert len(errors) == 1 and isinstance(errors[0], PlanError)
    assert "asking the autoscaler" in str(errors[0])
    assert _requested() == []  # withdrawn when the wait ended


@pytest.mark.ray
def test_an_actor_that_never_starts_is_an_error_naming_it(ray_session):
    """An actor whose resources never come free: ActorStartError after start_timeout_s, the actor killed."""
    import ray

    from pcr_ray.pipeline.actors import ActorStartError, wait_started

    @ray.remote(num_gpus=1)
    class Needy:
        def info(self):
            return {}

    h = Needy.remote()
    acfg = {"start_timeout_s": 2, "num_cpus": 0, "num_gpus": 1}
    with pytest.raises(ActorStartError, match=r"pcr-test-needy did not start within 2 s.*1 GPU.*0 GPU"):
        wait_started([h], ["pcr-test-needy"], acfg)


def test_the_actor_start_timeouts_are_in_the_schema():
    from pcr_ray.configs import EvaluateConfig

    cfg = EvaluateConfig()
    assert cfg.actors.generator.start_timeout_s > 0 and cfg.actors.prm.start_timeout_s > 0
    assert cfg.ray.wait_for_nodes_s > 0


def test_the_cli_lists_plan_and_tells_its_version(capsys):
    from importlib.metadata import version

    from pcr_ray.cli import main as cli

    assert cli(["--help"]) == 0 and "plan" in capsys.readouterr().out
    assert cli(["--version"]) == 0 and capsys.readouterr().out.strip() == f"pcr-ray {version('pcr_ray')}"
