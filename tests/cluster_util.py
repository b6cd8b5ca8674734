"""A Ray cluster of real `ray start` nodes on 127.0.0.1 for the cluster tests: a head and optional worker nodes,
each with its own ports, the head's own temp dir and auth token, and each node its own environment (its cache
folder), stopped by their process groups and by the processes that name the cluster's temp dir."""

from __future__ import annotations

import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def pids_using(marker: str) -> list[int]:
    """PIDs whose command line mentions `marker` (the cluster's unique temp dir)."""
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


@dataclass
class LocalCluster:
    """The running nodes: the dashboard URL to submit to, the environment of `ray` CLI calls, the head's GCS port."""

    url: str
    env: dict[str, str]
    gcs_port: int
    temp_dir: str
    procs: list[subprocess.Popen] = field(default_factory=list)
    node_dirs: list[Path] = field(default_factory=list)

    def ray(self, *args: str, timeout: float = 600, cwd: str | Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "ray"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=cwd)

    def stop(self) -> None:
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)  # `ray start --block` stops its node on SIGTERM
                p.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(1)
        for pid in pids_using(self.temp_dir):  # anything of this cluster that outlived its nodes
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)


WORKER_PORTS = 200  # ports per node for its worker processes


def _node_ports(workers_from: int) -> list[str]:
    """A node's own ports: its services' from the kernel's free ones (ephemeral, 32768 and up), its workers' a range
    of their own below that, so that no two nodes of the cluster and no two of its components meet."""
    nm, om, agent, grpc, metrics, rt = free_ports(6)
    return ["--node-manager-port", str(nm), "--object-manager-port", str(om), "--dashboard-agent-listen-port",
            str(agent), "--dashboard-agent-grpc-port", str(grpc), "--metrics-export-port", str(metrics),
            "--runtime-env-agent-port", str(rt), "--min-worker-port", str(workers_from),
            "--max-worker-port", str(workers_from + WORKER_PORTS - 1)]


def start_cluster(workdir: Path, head_cpus: int = 2, workers: tuple[dict, ...] = (),
                  head_env: dict[str, str] | None = None, timeout: float = 180) -> LocalCluster:
    """A head (no GPU) and worker nodes, e.g. workers=({"cpus": 1, "gpus": 1, "env": {...}},); returns once every
    node has joined. Each node's `env` adds to the environment its workers inherit (a cache folder of its own)."""
    gcs, dash, client = free_ports(3)
    workers_from = random.Random().randrange(20000, 30000 - WORKER_PORTS * (1 + len(workers)), WORKER_PORTS)
    temp_dir = tempfile.mkdtemp(prefix="pcrc", dir="/tmp")  # short: Ray's socket paths have a length limit
    token = workdir / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN_PATH": str(token), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    cluster = LocalCluster(f"http://127.0.0.1:{dash}", env, gcs, temp_dir)
    head = [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
            "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash), "--include-dashboard", "true",
            "--num-cpus", str(head_cpus), "--num-gpus", "0", "--temp-dir", temp_dir, "--ray-client-server-port",
            str(client), "--disable-usage-stats", *_node_ports(workers_from)]
    nodes = [(head, {**env, **(head_env or {})}, "head")]
    for i, w in enumerate(workers):
        cmd = [str(BIN / "ray"), "start", "--block", "--address", f"127.0.0.1:{gcs}", "--node-ip-address",
               "127.0.0.1", "--num-cpus", str(w.get("cpus", 1)), "--num-gpus", str(w.get("gpus", 0)),
               "--disable-usage-stats", *_node_ports(workers_from + WORKER_PORTS * (i + 1))]
        nodes.append((cmd, {**env, **dict(w.get("env") or {})}, f"worker{i + 1}"))
    try:
        for i, (cmd, node_env, name) in enumerate(nodes, 1):  # one at a time: two at once can time out on 2 cores
            for attempt in range(3):
                log = open(workdir / f"{name}.log", "w")  # noqa: SIM115  (closed with the process)
                cluster.procs.append(subprocess.Popen(cmd, env=node_env, cwd=workdir, stdout=log,
                                                      stderr=subprocess.STDOUT, start_new_session=True))
                try:
                    _wait(cluster, workdir, i, timeout)
                    break
                except RuntimeError:
                    # `ray start` gives a raylet 30 s to register (hard-coded in Ray): on a loaded machine a worker
                    # node can miss it and exit; start that worker again (the head is not retried)
                    if i == 1 or attempt == 2 or cluster.procs[-1].poll() is None:
                        raise
                    cluster.procs.pop()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def alive_nodes(cluster: LocalCluster) -> int:
    import re

    code = (f"import ray; ray.init(address='127.0.0.1:{cluster.gcs_port}', log_to_driver=False); "
            "print('ALIVE_NODES=%d' % sum(1 for n in ray.nodes() if n['Alive']))")
    out = subprocess.run([sys.executable, "-c", code], env=cluster.env, capture_output=True, text=True, timeout=60)
    m = re.search(r"ALIVE_NODES=(\d+)", out.stdout)
    return int(m.group(1)) if m else 0


def _wait(cluster: LocalCluster, workdir: Path, nodes: int, timeout: float) -> None:
    deadline = time.time() + timeout
    while True:
        ok = cluster.ray("job", "list", "--address", cluster.url, timeout=60)
        if ok.returncode == 0 and (nodes == 1 or alive_nodes(cluster) >= nodes):
            return
        dead = [p for p in cluster.procs if p.poll() is not None]
        if dead or time.time() > deadline:
            logs = "\n".join(f"{f.name}: {f.read_text()[-1500:]}" for f in sorted(workdir.glob("*.log")))
            raise RuntimeError(f"the local cluster did not come up ({nodes} nodes):\n{logs}\n{ok.stderr[-1500:]}")
        time.sleep(2)
