"""The cluster path as its users run it, on a cluster of a GPU cluster's shape built here: a head without GPUs and
two worker nodes that declare one GPU each (Ray schedules them without CUDA), `ray start` on 127.0.0.1 with their
own ports and token, each node with a cache folder of its own (no shared disk to work by accident).

- `ray job submit --runtime-env cluster/runtime_env.yaml -- <cluster/rayjob.yaml's entrypoint> generator=vllm_tiny
  ...` (the documented command, with the KubeRay job's entrypoint) runs every method of paper_table to the end
  (Ray Data, one engine actor for all of them, the PRM actor, grading, metrics, the report) with the real vLLM
  engine (on CPU), the engine and the PRM actor on the worker nodes, the PRM checkpoint shipped from the driver to
  the node that scores; the job's driver joins the head started here, with its token;
- the KubeRay job's runtime env is the documented one (same env vars; its working dir is the image's checkout);
- paper_table as shipped asks more than this cluster has: the job fails before any actor starts, naming what does
  not fit.

In the vLLM environment only (`make test-vllm`): the worker nodes run `generator=vllm_tiny`.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

pytest.importorskip("vllm")

from tests.cluster_util import start_cluster  # noqa: E402
from tests.pipeline_util import read_metrics, read_rows, tiny_checkpoint  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
# paper_table's methods, all through one engine actor; prm_only scores whatever parses, so the PRM actor is called
# whatever SmolLM2-135M writes
METHODS = {"nsprm", "prm_only", "verifier_only", "greedy", "best_of_n", "direct", "pyexec"}
# what CPU needs and no more: the engine and the PRM ask the GPUs the workers declare (placing them there), the
# engine runs on one CPU, two search workers on the head send it their batches at once, one problem, a short search,
# one program per problem, whole answers and programs cut at 64 tokens (SmolLM2-135M's are unreadable at any length;
# what is checked is that every method runs to its row)
CPU_OVERRIDES = ("generator=vllm_tiny", "generator.max_tokens_free=64", "prm=minilm_csp", "dataset.limit=1",
                 "actors.generator.replicas=1", "actors.generator.num_gpus=1", "actors.generator.num_cpus=1",
                 "actors.prm.num_gpus=0.5", "actors.prm.num_cpus=0", "pipeline.num_search_workers=2",
                 "pipeline.worker_num_cpus=1", "pipeline.batch_size=2", "pipeline.progress=false",
                 "search.beam_width=1", "search.k=2", "search.max_steps=2", "search.max_retries=1",
                 "search.max_backtracks=0", "search.n_samples=2", "baselines.max_attempts=1",
                 "ray.wait_for_nodes_s=10")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster")
    caches = {name: work / f"{name}_cache" for name in ("head", "worker1", "worker2")}
    c = start_cluster(work, head_cpus=2, head_env={"PCR_RAY_CACHE": str(caches["head"])},
                      workers=tuple({"cpus": 1, "gpus": 1, "env": {"PCR_RAY_CACHE": str(caches[w])}}
                                    for w in ("worker1", "worker2")))
    yield c, caches
    c.stop()


@pytest.fixture(autouse=True)
def _every_node_up(request):
    """Each test on the cluster runs on the whole cluster: a worker node whose raylet died since (an agent timing
    out on a loaded 2-core machine) is started again, and the test says so; a dead head fails the test."""
    if "cluster" not in request.fixturenames:
        return
    restarted = request.getfixturevalue("cluster")[0].restart_dead_workers()
    if restarted:
        warnings.warn(f"worker nodes started again (their raylet had exited; logs kept beside the node logs): "
                      f"{restarted}", stacklevel=1)


def _submit(cluster, run_dir: Path, entry: list[str], runtime_env: list[str], timeout: float = 600):
    job = cluster.ray("job", "submit", "--address", cluster.url, *runtime_env, "--", *entry,
                      f"hydra.run.dir={run_dir}", timeout=timeout, cwd=REPO)
    return job.returncode, job.stdout + job.stderr


def _check_run(run_dir: Path, caches: dict[str, Path], log: str) -> None:
    rows = read_rows(run_dir)
    assert {r["method"] for r in rows} == METHODS and len(rows) == len(METHODS), log[-3000:]
    assert not [r["error"] for r in rows if r.get("error")], [r["error"] for r in rows if r.get("error")]
    actors = read_metrics(run_dir)["actors"]
    engine = next(a for n, a in actors.items() if n.startswith("pcr-gen-"))
    prm = next(a for n, a in actors.items() if n.startswith("pcr-prm-"))
    workers = [caches["worker1"], caches["worker2"]]
    # the PRM scored on a worker node, from the checkpoint the driver shipped into that node's own cache
    here = Path(prm["checkpoint_here"])
    assert any(here.is_relative_to(w) for w in workers), here
    assert (here / "prm.json").exists() and prm["calls"] > 0
    # the engine ran on a worker node: it made its model folder there, from the GGUF, and not on the head
    made = [w for w in workers if (w / "models" / "smollm2-135m-instruct-hf" / "config.json").exists()]
    assert made and not (caches["head"] / "models").exists()
    assert engine["calls"] > 0 and engine["stats"]["engine_starts"] >= 1
    assert len([n for n in actors if n.startswith("pcr-gen-")]) == 1  # one engine actor served every method
    assert (run_dir / "report.html").stat().st_size > 1000


def _rayjob() -> dict:
    return yaml.safe_load((REPO / "cluster" / "rayjob.yaml").read_text())["spec"]


def test_the_rayjob_manifests_runtime_env_is_the_documented_one():
    documented = yaml.safe_load((REPO / "cluster" / "runtime_env.yaml").read_text())
    manifest = yaml.safe_load(_rayjob()["runtimeEnvYAML"])
    assert manifest["env_vars"] == documented["env_vars"]
    assert Path(manifest["working_dir"]).is_absolute()  # the image's checkout (cluster/Dockerfile)


def test_ray_job_submit_runs_paper_table_on_the_gpu_workers(cluster, tmp_path):
    c, caches = cluster
    entry = shlex.split(_rayjob()["entrypoint"])
    assert entry[:4] == ["python", "-m", "pcr_ray.evaluate", "experiment=paper_table"]
    # the manifest names one run folder on the shared volume, so a retried attempt resumes there (no `${now:...}`);
    # _submit's own hydra.run.dir comes after it and wins
    assert "hydra.run.dir=/mnt/shared/pcr_ray/runs/paper_table" in entry
    ckpt = tiny_checkpoint(tmp_path / "prm")  # on the driver's disk only, as far as the workers know
    run_dir = tmp_path / "run"
    rc, log = _submit(c, run_dir, [*entry, f"prm.checkpoint={ckpt}", *CPU_OVERRIDES],
                      ["--runtime-env", "cluster/runtime_env.yaml"])
    assert rc == 0, log[-5000:]
    assert "succeeded" in log and f":{c.gcs_port}" in log, f"the job's driver did not join our head:\n{log[-3000:]}"
    _check_run(run_dir, caches, log)
    assert "| nsprm |" in log  # the driver printed the metrics table


def test_a_tensor_parallel_engine_is_never_split_across_nodes(cluster):
    """generator.tensor_parallel_size=2 on two one-GPU nodes: the cluster has the two GPUs, but the engine's
    placement group (STRICT_PACK) wants them on one node and is never placed."""
    c, _ = cluster
    code = (f"import ray; ray.init(address='127.0.0.1:{c.gcs_port}', log_to_driver=False)\n"
            "from pcr_ray.pipeline.actors import engine_placement_group\n"
            "pg = engine_placement_group('tp2', [{'GPU': 1.0, 'CPU': 0.0}] * 2)\n"
            "print('GPUS=%g PLACED=%s' % (ray.cluster_resources().get('GPU', 0), pg.wait(10)))")
    out = subprocess.run([sys.executable, "-c", code], env=c.env, capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    assert "GPUS=2 PLACED=False" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


def test_a_job_that_cannot_fit_fails_naming_what(cluster, tmp_path):
    """paper_table's own actors (two engines of 2 CPUs each) on workers of 1 CPU: refused before any actor starts
    (the submit's timeout only guards against a hang)."""
    c, _ = cluster
    ckpt = tiny_checkpoint(tmp_path / "prm")
    rc, log = _submit(c, tmp_path / "run", ["python", "-m", "pcr_ray.cli", "evaluate",
                                                     "experiment=paper_table", "generator=vllm_tiny",
                                                     "prm=minilm_csp", f"prm.checkpoint={ckpt}", "dataset.limit=1",
                                                     "ray.wait_for_nodes_s=0"],
                               ["--runtime-env", "cluster/runtime_env.yaml"], timeout=180)
    assert rc != 0, log[-3000:]
    assert "DOES NOT FIT" in log and "generator:default" in log and "2 CPU" in log, log[-3000:]
