"""Cluster mode: start a Ray head with `ray start --head` on 127.0.0.1, submit the smoke experiment with
`ray job submit --working-dir .`, wait for it, read its results, and stop the head (only that head: it runs
in its own process group and temp dir; the test session's Ray is left alone).

Token authentication (Ray 2.60) is on, with a token file of the test's own (RAY_AUTH_MODE=token,
RAY_AUTH_TOKEN_PATH), the way cluster/README.md documents it."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.pipeline_util import read_metrics, read_rows, tiny_checkpoint

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _pids_using(marker: str) -> list[int]:
    """PIDs whose command line mentions `marker` (our head's unique temp dir)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd and int(d.name) != os.getpid():
                out.append(int(d.name))
    return out


@pytest.fixture()
def ray_head(tmp_path):
    """A Ray head on 127.0.0.1 with its own ports, temp dir and auth token; yields (dashboard url, env)."""
    gcs, dash, client, agent, metrics, rt_agent = _free_ports(6)
    temp_dir = tempfile.mkdtemp(prefix="pcrh", dir="/tmp")  # short: Ray's socket paths have a length limit
    token = tmp_path / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN_PATH": str(token), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    cmd = [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
           "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash), "--include-dashboard", "true",
           "--num-cpus", "2", "--temp-dir", temp_dir, "--ray-client-server-port", str(client),
           "--dashboard-agent-listen-port", str(agent), "--metrics-export-port", str(metrics),
           "--runtime-env-agent-port", str(rt_agent), "--disable-usage-stats"]
    head = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=open(tmp_path / "head.log", "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.time() + 120
        while True:
            ok = subprocess.run([str(BIN / "ray"), "job", "list", "--address", url], env=env, capture_output=True,
                                text=True, timeout=60)
            if ok.returncode == 0:
                break
            if head.poll() is not None or time.time() > deadline:
                pytest.fail(f"the Ray head did not come up: {(tmp_path / 'head.log').read_text()[-3000:]}\n"
                            f"{ok.stderr[-2000:]}")
            time.sleep(2)
        yield url, env, gcs
    finally:
        try:
            os.killpg(head.pid, signal.SIGTERM)  # `ray start --block` stops its node on SIGTERM
            head.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(head.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(1)
        for pid in _pids_using(temp_dir):  # anything of this head that outlived it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_ray_job_submit_runs_the_smoke_experiment_on_a_local_head(ray_head, tmp_path):
    url, env, gcs_port = ray_head
    ckpt = tiny_checkpoint(tmp_path / "prm")
    run_dir = tmp_path / "run"
    job = subprocess.run(
        [str(BIN / "ray"), "job", "submit", "--address", url, "--working-dir", ".", "--",
         "python", "-m", "pcr_ray.evaluate", "experiment=smoke", f"prm.checkpoint={ckpt}",
         f"hydra.run.dir={run_dir}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=420)
    log = job.stdout + job.stderr
    assert job.returncode == 0, log[-4000:]
    assert "succeeded" in log
    assert f":{gcs_port}" in log, f"the job's driver did not join the head we started:\n{log[-3000:]}"
    rows = read_rows(run_dir)
    keys = {(r["problem_id"], r["method"]) for r in rows}
    assert len(rows) == len(keys) == 4 * 3
    assert {m for _, m in keys} == {"verifier_only", "nsprm", "greedy"}
    assert not any(r["error"] for r in rows)
    m = read_metrics(run_dir)
    assert m["n_rows"] == 12 and (run_dir / ".hydra" / "config.yaml").exists() and (run_dir / "report.html").exists()
    assert "| verifier_only |" in log, "the job printed its metrics table"
