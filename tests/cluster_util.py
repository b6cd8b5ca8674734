"""A Ray cluster of real `ray start` nodes on 127.0.0.1 for the cluster tests: a head and optional worker nodes,
each with its own ports, the head's own temp dir and auth token, and each node its own environment (its cache
folder), stopped by their process groups and by the processes that name the cluster's temp dir."""

from __future__ import annotations

import os
import random
import re
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
    workdir: Path
    timeout: float
    nodes: list[NodeSpec] = field(default_factory=list)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)  # `ray start --block` of each node, by name

    def ray(self, *args: str, timeout: float = 600, cwd: str | Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "ray"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=cwd)

    def restart_dead_workers(self) -> list[str]:
        """Starts again each worker node whose `ray start` has exited (its raylet died: on a loaded 2-core machine
        an agent can time out), keeping the session's logs of why; returns their names. A dead head fails."""
        if self.procs["head"].poll() is not None:
            raise RuntimeError(f"the local cluster's head exited: {(self.workdir / 'head.log').read_text()[-3000:]}")
        dead = [s for s in self.nodes if self.procs[s.name].poll() is not None]
        for spec in dead:
            _keep_logs(self, spec.name)
            _start_node(self, spec)
        return [s.name for s in dead]

    def stop(self) -> None:
        for p in reversed(list(self.procs.values())):
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
AGENT_FLAGS = ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port")


def _node_ports(workers_from: int) -> list[str]:
    """A node's own ports: its services' from the kernel's free ones (ephemeral, 32768 and up), its workers' a range
    of their own below that, so that no two nodes of the cluster and no two of its components meet."""
    nm, om, agent, grpc, metrics, rt = free_ports(6)
    return ["--node-manager-port", str(nm), "--object-manager-port", str(om), "--dashboard-agent-listen-port",
            str(agent), "--dashboard-agent-grpc-port", str(grpc), "--metrics-export-port", str(metrics),
            "--runtime-env-agent-port", str(rt), "--min-worker-port", str(workers_from),
            "--max-worker-port", str(workers_from + WORKER_PORTS - 1)]


def listening_ports() -> set[int]:
    """The TCP ports some process of this machine listens on (any address), from /proc/net/tcp{,6}."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            if state == "0A":  # LISTEN
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


@dataclass(frozen=True)
class NodeSpec:
    """One `ray start` node: its name (its log is `<workdir>/<name>.log`), resources, environment, worker ports."""

    name: str
    cpus: int
    gpus: int
    env: dict[str, str]
    workers_from: int

    def command(self, cluster: LocalCluster) -> list[str]:
        if self.name == "head":
            head_ports = ["--head", "--port", str(cluster.gcs_port), "--dashboard-host", "127.0.0.1",
                          "--dashboard-port", cluster.url.rsplit(":", 1)[1], "--include-dashboard", "true",
                          "--temp-dir", cluster.temp_dir, "--ray-client-server-port", str(free_ports(1)[0])]
        else:
            head_ports = ["--address", f"127.0.0.1:{cluster.gcs_port}"]
        return [str(BIN / "ray"), "start", "--block", *head_ports, "--node-ip-address", "127.0.0.1", "--num-cpus",
                str(self.cpus), "--num-gpus", str(self.gpus), "--disable-usage-stats", *_node_ports(self.workers_from)]


def _port(cmd: list[str], flag: str) -> int:
    return int(cmd[cmd.index(flag) + 1])


def _launch(cluster: LocalCluster, spec: NodeSpec) -> tuple[list[str], subprocess.Popen]:
    """Runs `ray start --block` of `spec` (its log: `<workdir>/<name>.log`); returns its command and process."""
    cmd = spec.command(cluster)
    log = open(cluster.workdir / f"{spec.name}.log", "w")  # noqa: SIM115  (closed with the process)
    proc = subprocess.Popen(cmd, env=spec.env, stdout=log, stderr=subprocess.STDOUT, cwd=cluster.workdir,
                            start_new_session=True)
    cluster.procs[spec.name] = proc
    return cmd, proc


def _start_nodes(cluster: LocalCluster, specs: list[NodeSpec], attempts: int = 5) -> None:
    """Starts `specs` at once and returns once each has joined and its agents listen. A raylet exits when one of
    its agents fails to start (a port taken between free_ports and the agent's bind, or a timeout on a loaded
    machine: `ray start` gives a raylet 30 s to register, hard-coded in Ray): a worker node that dies so is started
    again on fresh ports, up to `attempts` times in all; the head is not retried."""
    launched = {spec.name: _launch(cluster, spec) for spec in specs}
    for spec in specs:
        for attempt in range(1, attempts + 1):
            cmd, proc = launched[spec.name]
            try:
                _wait(cluster, cmd, proc)
                break
            except RuntimeError:
                if spec.name == "head" or attempt == attempts or proc.poll() is None:
                    raise
                _keep_logs(cluster, f"{spec.name}-attempt{attempt}")
                launched[spec.name] = _launch(cluster, spec)


def _start_node(cluster: LocalCluster, spec: NodeSpec) -> None:
    """Starts one node (see _start_nodes)."""
    _start_nodes(cluster, [spec])


def _keep_logs(cluster: LocalCluster, tag: str) -> None:
    """Copies the tails of the session's agent and raylet logs beside the node logs, to read why a node died."""
    logs = sorted(Path(cluster.temp_dir).glob("session_*/logs/*"))
    text = [f"== {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-40:]) for f in logs
            if f.is_file() and f.suffix in (".log", ".out", ".err") and ("agent" in f.name or "raylet" in f.name)]
    (cluster.workdir / f"{tag}-died.log").write_text("\n".join(text))


def start_cluster(workdir: Path, head_cpus: int = 2, workers: tuple[dict, ...] = (),
                  head_env: dict[str, str] | None = None, timeout: float = 180) -> LocalCluster:
    """A head (no GPU) and worker nodes, e.g. workers=({"cpus": 1, "gpus": 1, "env": {...}},); returns once every
    node has joined and its agents listen. Each node's `env` adds to the environment its workers inherit (a cache
    folder of its own)."""
    gcs, dash = free_ports(2)
    workers_from = random.Random().randrange(20000, 30000 - WORKER_PORTS * (1 + len(workers)), WORKER_PORTS)
    temp_dir = tempfile.mkdtemp(prefix="pcrc", dir="/tmp")  # short: Ray's socket paths have a length limit
    token = workdir / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN_PATH": str(token), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    cluster = LocalCluster(f"http://127.0.0.1:{dash}", env, gcs, temp_dir, workdir=workdir, timeout=timeout)
    cluster.nodes = [NodeSpec("head", head_cpus, 0, {**env, **(head_env or {})}, workers_from)]
    cluster.nodes += [NodeSpec(f"worker{i + 1}", w.get("cpus", 1), w.get("gpus", 0),
                               {**env, **dict(w.get("env") or {})}, workers_from + WORKER_PORTS * (i + 1))
                      for i, w in enumerate(workers)]
    try:
        _start_node(cluster, cluster.nodes[0])  # the head first: the workers join it
        _start_nodes(cluster, cluster.nodes[1:])  # the workers at once (a worker that times out is started again)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def alive_nodes(cluster: LocalCluster) -> set[int]:
    """The node-manager ports of the nodes the cluster's GCS holds alive (one per node here: all share 127.0.0.1)."""
    code = (f"import ray; ray.init(address='127.0.0.1:{cluster.gcs_port}', log_to_driver=False); "
            "print('ALIVE_NODES=%s' % [n['NodeManagerPort'] for n in ray.nodes() if n['Alive']])")
    out = subprocess.run([sys.executable, "-c", code], env=cluster.env, capture_output=True, text=True, timeout=60)
    m = re.search(r"ALIVE_NODES=\[([\d, ]*)\]", out.stdout)
    return {int(x) for x in m.group(1).split(",") if x.strip()} if m else set()


def _wait(cluster: LocalCluster, cmd: list[str], proc: subprocess.Popen) -> None:
    """Until the node `proc` runs (`ray start ... cmd`) has joined the cluster and the ports of its agents listen.
    The cheap checks (the process, its agents' ports) come first: each of the others starts a Python process that
    imports Ray, load that would slow the very start it waits for."""
    deadline = time.time() + cluster.timeout
    agents = {_port(cmd, flag) for flag in AGENT_FLAGS}
    stderr = ""
    while True:
        if proc.poll() is None and agents <= listening_ports():
            ok = cluster.ray("job", "list", "--address", cluster.url, timeout=60)
            stderr = ok.stderr
            if (ok.returncode == 0 and _port(cmd, "--node-manager-port") in alive_nodes(cluster)
                    and proc.poll() is None):
                return
        if proc.poll() is not None or time.time() > deadline:
            logs = "\n".join(f"{f.name}: {f.read_text()[-1500:]}" for f in sorted(cluster.workdir.glob("*.log")))
            raise RuntimeError(f"the local cluster did not come up ({cmd[2:4]}):\n{logs}\n{stderr[-1500:]}")
        time.sleep(1)
