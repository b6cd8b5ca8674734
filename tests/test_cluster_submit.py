"""Cluster mode: a Ray head started with `ray start --head` on 127.0.0.1 (tests/cluster_util.py), the smoke
experiment submitted the way cluster/README.md says (`ray job submit --runtime-env cluster/runtime_env.yaml`),
its results read, and the head stopped (only that head: its process group and temp dir; the test session's Ray
is left alone).

Token authentication (Ray 2.60) is on, with a token file of the test's own (RAY_AUTH_MODE=token,
RAY_AUTH_TOKEN_PATH), the way cluster/README.md documents it. The multi-node cluster of a GPU cluster's shape,
with the vLLM engine, is tests/test_cluster_multinode.py (the vLLM suite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster_util import start_cluster
from tests.pipeline_util import read_metrics, read_rows, tiny_checkpoint

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture()
def ray_head(tmp_path):
    cluster = start_cluster(tmp_path, head_cpus=2)
    yield cluster
    cluster.stop()


def test_ray_job_submit_runs_the_smoke_experiment_on_a_local_head(ray_head, tmp_path):
    """The documented command, with the runtime env file: the job's env vars and the driver's must merge."""
    ckpt = tiny_checkpoint(tmp_path / "prm")
    run_dir = tmp_path / "run"
    job = ray_head.ray("job", "submit", "--address", ray_head.url, "--runtime-env", "cluster/runtime_env.yaml",
                       "--", "python", "-m", "pcr_ray.evaluate", "experiment=smoke", f"prm.checkpoint={ckpt}",
                       f"hydra.run.dir={run_dir}", timeout=420, cwd=REPO)
    log = job.stdout + job.stderr
    assert job.returncode == 0, log[-4000:]
    assert "succeeded" in log
    assert f":{ray_head.gcs_port}" in log, f"the job's driver did not join the head we started:\n{log[-3000:]}"
    rows = read_rows(run_dir)
    keys = {(r["problem_id"], r["method"]) for r in rows}
    assert len(rows) == len(keys) == 4 * 3
    assert {m for _, m in keys} == {"verifier_only", "nsprm", "greedy"}
    assert not any(r["error"] for r in rows)
    m = read_metrics(run_dir)
    assert m["n_rows"] == 12 and (run_dir / ".hydra" / "config.yaml").exists() and (run_dir / "report.html").exists()
    assert "| verifier_only |" in log, "the job printed its metrics table"
