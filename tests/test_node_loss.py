"""A worker node lost in the middle of an evaluation: on a local cluster of a head and two one-GPU worker nodes,
each worker hosting one generator replica and one PRM replica at paper_table's shares of its GPU (0.88 + 0.12), the
first worker's `ray start` process group is SIGKILLed (raylet, agents and workers at once, as a node lost with its
machine) once the first shard lands. The run ends with every row once and none an error: a search worker pinned
to a lost replica waits at most `call_timeout_s` for it and moves its batch to the survivor (pcr_ray.pipeline.actors,
_ReplicaProxy), for the generator and the PRM alike."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pcr_ray.pipeline.results import shard_paths
from tests.cluster_util import pids_using, start_cluster
from tests.pipeline_util import read_metrics, read_rows, tiny_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.ray]

REPO = Path(__file__).resolve().parent.parent
PROBLEMS = 12
CALL_TIMEOUT_S = 20


def lose_node(cluster, name: str) -> None:
    """SIGKILL every process of node `name` at once (its `ray start`, raylet, agents, workers: all that name the
    node's own temp dir), as a node lost with its machine: nothing of it shuts down cleanly."""
    pids = pids_using(f"{cluster.temp_dir}/{name}/")
    assert pids, f"no process of {name} found"
    for pid in [cluster.procs[name].pid, *pids]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_node_lost_mid_run_costs_no_row(tmp_path):
    # the workers declare a GPU and no CPU: each takes one generator replica and one PRM replica (paper_table's
    # shares: an engine keeps 0.88 of its GPU, the PRM takes the 0.12 beside it), while the search workers (CPUs)
    # stay on the head, so the node lost takes exactly one replica of each model with it. `replicas: auto` counts
    # them from the cluster: two engines on two GPUs, two PRMs in the shares left beside them
    (tmp_path / "cluster").mkdir()
    c = start_cluster(tmp_path / "cluster", head_cpus=4, workers=({"cpus": 0, "gpus": 1}, {"cpus": 0, "gpus": 1}))
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "pcr_ray.evaluate", "experiment=smoke", "methods=[nsprm]",
           f"dataset.sources=[{{name: physics, limit: {PROBLEMS}, kwargs: {{n: {PROBLEMS}, seed: 1}}}}]",
           f"ray.address=127.0.0.1:{c.gcs_port}", f"hydra.run.dir={run_dir}",
           f"prm.checkpoint={tiny_checkpoint(tmp_path / 'prm')}", "actors.generator.placement=actor",
           "actors.generator.replicas=auto", "actors.generator.num_gpus=0.88", "actors.generator.num_cpus=0",
           f"actors.generator.call_timeout_s={CALL_TIMEOUT_S}", "actors.prm.replicas=auto", "actors.prm.num_gpus=0.12",
           "actors.prm.num_cpus=0", f"actors.prm.call_timeout_s={CALL_TIMEOUT_S}",
           "pipeline.num_search_workers=2", "pipeline.batch_size=1", "ray.wait_for_nodes_s=30"]
    try:
        with open(tmp_path / "evaluate.log", "w") as log:
            run = subprocess.Popen(cmd, env=c.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 600
            while not shard_paths(run_dir) and run.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            landed = len(shard_paths(run_dir))
            assert run.poll() is None and 0 < landed < PROBLEMS, (landed, (tmp_path / "evaluate.log").read_text())
            lose_node(c, "worker1")
            killed_at = time.monotonic()
            rc = run.wait(timeout=900)
        took = time.monotonic() - killed_at
        text = (tmp_path / "evaluate.log").read_text()
        assert rc == 0, text[-5000:]
        assert "actors.generator.replicas=auto: 2" in text and "actors.prm.replicas=auto: 2" in text, text[-5000:]
    finally:
        c.stop()
    rows = read_rows(run_dir)
    assert len({r["problem_id"] for r in rows}) == len(rows) == PROBLEMS  # each problem once
    assert not [r["error"] for r in rows if r.get("error")]
    actors = read_metrics(run_dir)["actors"]
    alive = {}
    for prefix in ("pcr-gen-", "pcr-prm-"):
        group = {n: a for n, a in actors.items() if n.startswith(prefix)}
        # the replica of the lost node does not answer; the survivor served the rest
        assert len(group) == 2 and sorted("error" in a for a in group.values()) == [False, True], actors
        alive[prefix] = next(a for a in group.values() if "error" not in a)
        assert alive[prefix]["calls"] > 0, actors
    # the shares put one engine and one PRM on each GPU worker: the survivors share the surviving node
    assert alive["pcr-gen-"]["node"] == alive["pcr-prm-"]["node"], actors
    # the rest of the run took a bounded wait for the lost replica (call_timeout_s per pinned worker), not hours
    assert took < 600, took
    print(f"node lost after {landed} of {PROBLEMS} shards; the run ended {took:.0f} s later; actors: {actors}")
