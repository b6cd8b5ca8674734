"""A Ray cluster of real `ray start` nodes on 127.0.0.1 for the cluster tests: a head and optional worker nodes,
each with its own ports, the head's own temp dir and auth token, and each node its own environment (its cache
folder), stopped by their process groups and by the processes that name the cluster's temp dir."""

from __future__ import annotations

import fcntl
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent


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
    launches: dict[str, int] = field(default_factory=dict)  # how often each node was started (its port set)
    port_lock: object = None  # the open lock file of the cluster's port block, held while the cluster runs

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
            _stop_process_group(p)
        time.sleep(1)
        for pid in pids_using(self.temp_dir):  # anything of this cluster that outlived its nodes
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        if self.port_lock is not None:
            self.port_lock.close()
            self.port_lock = None


def _stop_process_group(p: subprocess.Popen) -> None:
    """SIGTERM to a node's `ray start --block` process group (it stops its node), SIGKILL after 15 s."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# Every port of a test cluster lies below the kernel's ephemeral range (32768 and up), where no outgoing connection
# takes one: a port found free there can be taken by any process's connect() before `ray start` binds it (a raylet
# then aborts, "bind: Address already in use"). Each cluster holds a block of its own, locked by a file while it
# runs so that clusters of parallel suites never meet; in a block each node has a slot: its workers' ports, then a
# set of service ports for each start (a node started again binds fresh ones).
PORT_BLOCKS = range(20000, 32000, 1200)
WORKER_PORTS = 200  # ports per node for its worker processes
SERVICE_PORTS = 10  # ports per start of a node: its services (and the head's GCS, dashboard and client server)
STARTS = 8  # service port sets per node
SLOT = WORKER_PORTS + SERVICE_PORTS * STARTS
AGENT_FLAGS = ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port")


def _reserve_port_block() -> tuple[int, object]:
    """The first port of a block no other test cluster of this machine holds, and its lock file (held open)."""
    for base in random.sample(list(PORT_BLOCKS), len(PORT_BLOCKS)):
        lock = open(Path(tempfile.gettempdir()) / f"pcr-ray-test-ports-{base}.lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return base, lock
        except BlockingIOError:
            lock.close()
    raise RuntimeError(f"every port block of the test clusters is held ({len(PORT_BLOCKS)} clusters running)")


def _service_ports(slot: int, start: int, n: int) -> list[int]:
    """`n` ports of the `start`-th service set of the node slot at `slot`."""
    first = slot + WORKER_PORTS + SERVICE_PORTS * (start % STARTS)
    return list(range(first, first + n))


def _node_ports(slot: int, start: int) -> list[str]:
    """A node's own ports for its `start`-th start: its services' and its workers' (see PORT_BLOCKS)."""
    nm, om, agent, grpc, metrics, rt = _service_ports(slot, start, 6)
    return ["--node-manager-port", str(nm), "--object-manager-port", str(om), "--dashboard-agent-listen-port",
            str(agent), "--dashboard-agent-grpc-port", str(grpc), "--metrics-export-port", str(metrics),
            "--runtime-env-agent-port", str(rt), "--min-worker-port", str(slot),
            "--max-worker-port", str(slot + WORKER_PORTS - 1)]


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
    """One `ray start` node: its name (its log is `<workdir>/<name>.log`), resources, environment, port slot."""

    name: str
    cpus: int
    gpus: int
    env: dict[str, str]
    slot: int

    def command(self, cluster: LocalCluster, start: int) -> list[str]:
        if self.name == "head":
            client = _service_ports(self.slot, 0, 9)[8]  # after the node's six and the GCS and dashboard
            head_ports = ["--head", "--port", str(cluster.gcs_port), "--dashboard-host", "127.0.0.1",
                          "--dashboard-port", cluster.url.rsplit(":", 1)[1], "--include-dashboard", "true",
                          "--temp-dir", cluster.temp_dir, "--ray-client-server-port", str(client)]
        else:  # a temp dir of its own: nodes that share one race for the same socket names (Ray picks the first
            # free `plasma_store`, `plasma_store.1`, ... as each node starts, and two nodes starting at once pick one)
            head_ports = ["--address", f"127.0.0.1:{cluster.gcs_port}", "--temp-dir",
                          f"{cluster.temp_dir}/{self.name}"]
        return [str(BIN / "ray"), "start", "--block", *head_ports, "--node-ip-address", "127.0.0.1", "--num-cpus",
                str(self.cpus), "--num-gpus", str(self.gpus), "--disable-usage-stats", *_node_ports(self.slot, start)]


def _port(cmd: list[str], flag: str) -> int:
    return int(cmd[cmd.index(flag) + 1])


def _launch(cluster: LocalCluster, spec: NodeSpec) -> tuple[list[str], subprocess.Popen]:
    """Runs `ray start --block` of `spec` (its log: `<workdir>/<name>.log`); returns its command and process."""
    start = cluster.launches.get(spec.name, 0)
    cluster.launches[spec.name] = start + 1
    cmd = spec.command(cluster, start)
    log = open(cluster.workdir / f"{spec.name}.log", "w")  # noqa: SIM115  (closed with the process)
    proc = subprocess.Popen(cmd, env=spec.env, stdout=log, stderr=subprocess.STDOUT, cwd=cluster.workdir,
                            start_new_session=True)
    cluster.procs[spec.name] = proc
    return cmd, proc


def _start_nodes(cluster: LocalCluster, specs: list[NodeSpec], attempts: int = 5) -> None:
    """Starts `specs` at once and returns once each has joined and its agents listen. A raylet exits when one of
    its agents fails to start (a timeout on a loaded machine: `ray start` gives a raylet 30 s to register,
    hard-coded in Ray): a node that dies so, or has not joined within the cluster's timeout, is stopped and started
    again on fresh node ports (the head keeps its GCS and dashboard ports), up to `attempts` times in all."""
    launched = {spec.name: _launch(cluster, spec) for spec in specs}
    for spec in specs:
        for attempt in range(1, attempts + 1):
            cmd, proc = launched[spec.name]
            try:
                _wait(cluster, cmd, proc)
                break
            except RuntimeError:
                if attempt == attempts:
                    raise
                _stop_process_group(proc)
                _keep_logs(cluster, f"{spec.name}-attempt{attempt}")
                launched[spec.name] = _launch(cluster, spec)


def _start_node(cluster: LocalCluster, spec: NodeSpec) -> None:
    """Starts one node (see _start_nodes)."""
    _start_nodes(cluster, [spec])


def _keep_logs(cluster: LocalCluster, tag: str) -> None:
    """Copies the tails of the session's agent and raylet logs beside the node logs, to read why a node died."""
    logs = sorted(Path(cluster.temp_dir).glob("**/session_*/logs/*"))
    text = [f"== {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-40:]) for f in logs
            if f.is_file() and f.suffix in (".log", ".out", ".err") and ("agent" in f.name or "raylet" in f.name)]
    (cluster.workdir / f"{tag}-died.log").write_text("\n".join(text))


def start_cluster(workdir: Path, head_cpus: int = 2, workers: tuple[dict, ...] = (),
                  head_env: dict[str, str] | None = None, timeout: float = 180) -> LocalCluster:
    """A head (no GPU) and worker nodes, e.g. workers=({"cpus": 1, "gpus": 1, "env": {...}},); returns once every
    node has joined and its agents listen. Each node's `env` adds to the environment its workers inherit (a cache
    folder of its own)."""
    if len(workers) + 1 > PORT_BLOCKS.step // SLOT:
        raise ValueError(f"a test cluster has at most {PORT_BLOCKS.step // SLOT - 1} worker nodes")
    block, port_lock = _reserve_port_block()
    gcs, dash = _service_ports(block, 0, 8)[6:]  # the head's slot is the block's first
    temp_dir = tempfile.mkdtemp(prefix="pcrc", dir="/tmp")  # short: Ray's socket paths have a length limit
    token = workdir / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN_PATH": str(token), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    cluster = LocalCluster(f"http://127.0.0.1:{dash}", env, gcs, temp_dir, workdir=workdir, timeout=timeout,
                           port_lock=port_lock)
    cluster.nodes = [NodeSpec("head", head_cpus, 0, {**env, **(head_env or {})}, block)]
    cluster.nodes += [NodeSpec(f"worker{i + 1}", w.get("cpus", 1), w.get("gpus", 0),
                               {**env, **dict(w.get("env") or {})}, block + SLOT * (i + 1))
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
