"""`pcr-ray evaluate` killed with SIGKILL mid-run, then rerun on the same run directory: every problem x method
row exactly once, none lost; a shard left truncated is reported in one line, set aside, and its rows run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pcr_ray.evaluate import compose_config, evaluate
from pcr_ray.pipeline.results import CORRUPT_SUFFIX, shard_paths
from tests.pipeline_util import read_metrics, read_rows, smoke_overrides, tiny_checkpoint

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
N_PROBLEMS = 8
METHODS = ("verifier_only", "greedy")


def _overrides(run: Path, prm: Path) -> list[str]:
    return smoke_overrides(run, prm, f"dataset.sources=[{{name:physics,limit:{N_PROBLEMS},"
                                     f"kwargs:{{n:{N_PROBLEMS},seed:3}}}}]", f"methods=[{','.join(METHODS)}]",
                           "pipeline.batch_size=1", "pipeline.num_search_workers=1")


def _descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _kill_leftovers(pids: list[int]) -> None:
    """SIGKILL, by PID, what the killed driver had started and is still alive (a local Ray it owned)."""
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sigkilled_evaluate_resumes_with_every_row_once_and_a_truncated_shard_rerun(
        ray_session, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    prm = tiny_checkpoint(tmp_path / "prm")
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    log = (tmp_path / "driver.log").open("w")
    # The driver joins the session's Ray as a second job (as on a cluster): its kill takes its actors, not Ray.
    address = ray_session.get_runtime_context().gcs_address
    driver = subprocess.Popen([sys.executable, "-m", "pcr_ray.evaluate", *_overrides(run, prm),
                               f"ray.address={address}"], cwd=tmp_path,
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started: list[int] = []
    try:
        deadline = time.monotonic() + 180  # generous: a loaded CI machine
        while len(shard_paths(run)) < 3:  # mid-run: some batches written, most not
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the driver wrote fewer than 3 shards in 180 s"
            started = _descendants(driver.pid) or started
            time.sleep(0.2)
        started = _descendants(driver.pid) or started
        os.kill(driver.pid, signal.SIGKILL)
        assert driver.wait(timeout=30) == -signal.SIGKILL
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        time.sleep(1.0)
        _kill_leftovers(started)
        log.close()
    total = N_PROBLEMS * len(METHODS)
    shards = shard_paths(run)
    assert 3 <= sum(pq.read_table(p).num_rows for p in shards) < total, "killed mid-run"
    assert not (run / "results.parquet").exists()

    cut = shards[-1]  # a shard whose tail was lost: its rows must run again
    cut_rows = pq.read_table(cut).num_rows
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    done_before = len({(r["problem_id"], r["method"]) for p in shards[:-1] for r in pq.read_table(p).to_pylist()})
    caplog.clear()

    evaluate(compose_config(_overrides(run, prm)))
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and cut.name in r.getMessage()]
    assert len(warned) == 1 and "unreadable" in warned[0] and "run again" in warned[0], caplog.text
    assert (cut.parent / (cut.name + CORRUPT_SUFFIX)).exists() and not cut.exists()
    rows = read_rows(run)
    keys = [(r["problem_id"], r["method"]) for r in rows]
    assert len(keys) == len(set(keys)) == total  # every problem x method exactly once
    assert {m for _, m in keys} == set(METHODS) and len({p for p, _ in keys}) == N_PROBLEMS
    assert not any(r["error"] for r in rows)
    m = read_metrics(run)
    assert m["rows_resumed"] == done_before and m["rows_this_run"] == total - done_before >= cut_rows
