"""The resource plan of an evaluation: what each actor pool asks of a cluster, where it lands, and what would fit.

    pcr-ray plan experiment=paper_table                     # against every named cluster shape
    pcr-ray plan experiment=paper_table --shape one_gpu     # against one
    pcr-ray plan experiment=paper_table --address auto      # against the running cluster (and its sandbox)

`pools(cfg)` lists the actor pools of a composed evaluate config (vLLM engines, other generator actors, PRM
scorers, the search workers) with the CPUs, GPUs and GPU memory share each replica asks. `place(pools, nodes)`
packs them onto nodes the way Ray schedules them (a whole GPU for num_gpus >= 1, one device's fraction below 1,
a tensor-parallel engine's GPUs on one node) and `advice` names the settings that would make the rest fit.
`evaluate` checks the same plan against the cluster it joined before it starts an actor (`check_cluster`), so a
job that cannot fit fails at once with what does not fit, instead of waiting for resources that never come.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from pcr_ray.commands.hydra_app import run_hydra
from pcr_ray.configs import to_plain
from pcr_ray.generators.base import backend_of
from pcr_ray.pipeline.node_sandbox import format_sandbox, probe_nodes
from pcr_ray.pipeline.ray_runtime import init_ray
from pcr_ray.pipeline.search_batch import parse_methods

EPS = 1e-9


class PlanError(RuntimeError):
    """The evaluation's actors do not fit the cluster; the message names each pool that does not, and why."""


@dataclass(frozen=True)
class Node:
    """A node's resources: logical CPUs, GPUs (whole devices) and memory in GiB (0: not stated)."""

    name: str
    cpus: float
    gpus: int = 0
    memory_gib: float = 0.0


@dataclass(frozen=True)
class Pool:
    """One actor pool: `replicas` actors, each asking `cpus` CPUs and `gpus` GPUs (a fraction of one device below
    1; `tp` devices of one node for a tensor-parallel engine) and `gpu_memory` of each device's memory."""

    role: str
    replicas: int
    cpus: float
    gpus: float = 0.0
    tp: int = 1
    gpu_memory: float = 0.0
    note: str = ""
    auto: bool = False  # `replicas: auto`: as many as fit the nodes (fit_auto)


@dataclass
class _NodeState:
    node: Node
    cpus: float
    gpu_free: list[float]  # per device: the share of the device's GPU resource still free
    gpu_memory: list[float]  # per device: the memory share the actors placed on it take


@dataclass
class Placement:
    """Where each replica landed (role, replica, node) and which replicas did not fit, with the reason."""

    nodes: tuple[Node, ...]
    placed: list[tuple[str, int, str]] = field(default_factory=list)
    unplaced: list[tuple[Pool, int, str]] = field(default_factory=list)
    memory_over: list[str] = field(default_factory=list)
    replicas: dict[str, int] = field(default_factory=dict)  # per `actors.<role>`: the replicas planned

    @property
    def fits(self) -> bool:
        return not self.unplaced and not self.memory_over


# the shapes `pcr-ray plan --shape` knows; the two-node one is cluster/rayjob.yaml's and cluster/cluster.yaml's
SHAPES: dict[str, tuple[Node, ...]] = {
    "one_gpu": (Node("node", 8, 1, 32),),
    "two_nodes_one_gpu": (Node("head", 16, 0, 64), Node("gpu-worker-1", 8, 1, 48), Node("gpu-worker-2", 8, 1, 48)),
    "one_node_eight_gpus": (Node("node", 96, 8, 1024),),
}


def pools(cfg: Mapping[str, Any]) -> list[Pool]:
    """The actor pools a composed evaluate config (plain dict) starts: model actors of the generators and PRMs its
    methods use, and the search worker pool."""
    from pcr_ray.pipeline.actors import generator_runs_locally, vllm_placement  # heavy: ray

    specs = parse_methods(cfg["methods"], cfg["method_generators"], cfg["method_overrides"], cfg["method_prms"])
    gens = {"default": cfg["generator"], **cfg["generators"]}
    prms = {"default": cfg["prm"], **cfg["prms"]}
    actors = cfg["actors"]
    out: list[Pool] = []
    for key in sorted({s.generator for s in specs}):
        g, a = dict(gens[key]), actors["generator"]
        if generator_runs_locally(g, a):
            continue
        kind = str(g["kind"])
        if backend_of(g).async_engine:
            place = vllm_placement(g, a)
            tp = int(g["tensor_parallel_size"]) if place["bundles"] else 1
            gpus = float(place["num_gpus"]) if not place["bundles"] else float(tp)
            cpus = float(place["num_cpus"]) if not place["bundles"] else float(place["bundles"][0]["CPU"])
            on_gpu = gpus > 0 and str(g["device"]) != "cpu"  # a CPU engine may still reserve GPUs
            mem = float(g["gpu_memory_utilization"]) if on_gpu else 0.0
            out.append(Pool(f"generator:{key}", 1, cpus, gpus, tp, mem, f"vLLM engine, {g.get('model')}"))
        else:
            out.append(Pool(f"generator:{key}", 1, float(a["num_cpus"]), float(a["num_gpus"]),
                            note=f"{kind} generator"))
        out[-1] = _with_replicas(out[-1], a["replicas"], "generator")
    used_prms = sorted({s.prm for s in specs if s.uses_prm})
    for key in used_prms:
        a = actors["prm"]
        gpus = float(a["num_gpus"])
        out.append(_with_replicas(Pool(f"prm:{key}", 1, float(a["num_cpus"]), gpus, 1, gpus,
                                       f"PRM scorer, {prms[key].get('backbone')}"), a["replicas"], "prm"))
    p = cfg["pipeline"]
    out.append(Pool("search_workers", int(p["num_search_workers"]), float(p["worker_num_cpus"]),
                    note="Ray Data actor pool: verifier, search, grading"))
    return out


def _with_replicas(pool: Pool, value: Any, role: str) -> Pool:
    """`pool` at `actors.<role>.replicas`: a count, or `auto` (one until fit_auto sizes it to the nodes)."""
    if value == "auto":
        if pool.gpus <= 0 and pool.cpus <= 0:
            raise ValueError(f"actors.{role}.replicas=auto counts the replicas that fit the cluster's GPUs or CPUs; "
                             f"set actors.{role}.num_gpus or num_cpus above 0, or a number of replicas")
        return replace(pool, replicas=1, auto=True)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"actors.{role}.replicas must be a count of at least 1 or auto, not {value!r}")
    return replace(pool, replicas=value)


def fit_auto(pool_list: Sequence[Pool], nodes: Sequence[Node]) -> list[Pool]:
    """The pools with each `auto` one at the most replicas that fit `nodes` beside the others: the generators'
    first (one count for all of them), then the PRMs' in what is left; at least one (a plan that cannot place
    one waits for nodes or refuses as any other)."""
    out = list(pool_list)
    for prefix in ("generator:", "prm:"):
        idx = {i for i, p in enumerate(out) if p.auto and p.role.startswith(prefix)}
        if not idx:
            continue
        best, most = 1, max(_most(out[i], nodes) for i in idx)
        for n in range(2, most + 1):
            if not place([replace(p, replicas=n) if i in idx else p for i, p in enumerate(out)], nodes).fits:
                break
            best = n
        out = [replace(p, replicas=best) if i in idx else p for i, p in enumerate(out)]
    return out


def _most(pool: Pool, nodes: Sequence[Node]) -> int:
    """An upper bound on the replicas of `pool` the nodes hold, each alone."""
    if pool.gpus >= 1:
        return sum(n.gpus // math.ceil(pool.gpus - EPS) for n in nodes)
    if pool.gpus > 0:
        return sum(n.gpus * math.floor(1 / pool.gpus + EPS) for n in nodes)
    return int(sum(n.cpus for n in nodes) // pool.cpus)


def planned_replicas(pool_list: Sequence[Pool]) -> dict[str, int]:
    """The replicas of each `actors.<role>` (generator, prm) the plan starts, from its pools."""
    return {p.role.split(":")[0]: p.replicas for p in pool_list if p.role.startswith(("generator:", "prm:"))}


def place(pool_list: Sequence[Pool], nodes: Sequence[Node]) -> Placement:
    """Pack every replica onto the nodes, largest GPU asks first, each on the first node (and device) it fits."""
    state = [_NodeState(n, float(n.cpus), [1.0] * int(n.gpus), [0.0] * int(n.gpus)) for n in nodes]
    out = Placement(tuple(nodes))
    order = sorted(((p, i) for p in pool_list for i in range(p.replicas)), key=lambda pi: (-pi[0].gpus, -pi[0].cpus))
    for pool, i in order:
        where, why = _fit(pool, state)
        if where is None:
            out.unplaced.append((pool, i, why))
        else:
            out.placed.append((pool.role, i, where))
    for s in state:
        for d, used in enumerate(s.gpu_memory):
            if used > 1.0 + EPS:
                out.memory_over.append(f"{s.node.name} GPU {d}: the actors on it take {used:.2f} of its memory")
    return out


def _fit(pool: Pool, state: list[_NodeState]) -> tuple[str | None, str]:
    need = pool.gpus
    for s in state:
        if s.cpus + EPS < pool.cpus:
            continue
        if need <= 0:
            s.cpus -= pool.cpus
            return s.node.name, ""
        if need >= 1:  # whole devices on one node (a tensor-parallel engine's, or num_gpus >= 1)
            whole = [d for d, f in enumerate(s.gpu_free) if f >= 1 - EPS]
            if len(whole) >= math.ceil(need - EPS):
                for d in whole[:math.ceil(need - EPS)]:
                    s.gpu_free[d] = 0.0
                    s.gpu_memory[d] += pool.gpu_memory
                s.cpus -= pool.cpus
                return s.node.name, ""
            continue
        dev = next((d for d, f in enumerate(s.gpu_free) if f + EPS >= need), None)
        if dev is not None:
            s.gpu_free[dev] -= need
            s.gpu_memory[dev] += pool.gpu_memory
            s.cpus -= pool.cpus
            return f"{s.node.name} GPU {dev}", ""
    total_gpus = sum(len(s.gpu_free) for s in state)
    free_gpu = sum(sum(s.gpu_free) for s in state)
    what = (f"{pool.cpus:g} CPU" + (f" and {pool.gpus:g} GPU" + (" on one node" if pool.tp > 1 else "")
                                    if pool.gpus else ""))
    return None, (f"asks {what}; the cluster has {sum(s.node.cpus for s in state):g} CPU and {total_gpus} GPU "
                  f"({sum(s.cpus for s in state):g} CPU and {free_gpu:.2f} GPU left by the actors "
                  f"placed before it)")


def advice(pool_list: Sequence[Pool], nodes: Sequence[Node], placement: Placement) -> list[str]:
    """Settings that would make the unplaced replicas fit (each a Hydra override with why)."""
    if placement.fits:
        return []
    tips: list[str] = []
    gpus = sum(n.gpus for n in nodes)
    largest_node = max((n.gpus for n in nodes), default=0)
    engines = [p for p in pool_list if p.role.startswith("generator:") and p.gpus > 0]
    prm = [p for p in pool_list if p.role.startswith("prm:") and p.gpus > 0]
    for e in engines:
        if e.tp > largest_node:
            tips.append(f"generator.tensor_parallel_size={max(1, largest_node)}: a tensor-parallel engine's GPUs "
                        f"are on one node, and the largest node has {largest_node}")
        most = gpus * math.floor(1 / e.gpus + EPS) if e.gpus < 1 else gpus // math.ceil(e.gpus - EPS)
        if e.replicas > most and gpus:
            tips.append(f"actors.generator.replicas={max(1, most)}: {e.replicas} engines of {e.gpus:g} GPU on "
                        f"{gpus} GPU")
    if engines and prm and gpus and all(e.tp == 1 for e in engines):
        per_gpu = max(p.gpus for p in prm)  # one PRM replica's share, beside one engine on its GPU
        keep = round(1 - per_gpu, 3)
        mem = round(min(max(e.gpu_memory for e in engines) or 0.9, keep - 0.02), 2)
        if any(e.gpus > keep + EPS or e.gpu_memory > mem + EPS for e in engines):
            tips.append(f"actors.generator.num_gpus={keep:g} generator.gpu_memory_utilization={mem:g}: each engine "
                        f"keeps {keep:g} of its GPU, so a PRM replica of {per_gpu:g} GPU fits beside one")
    cpu_short = [u for u in placement.unplaced if u[0].role == "search_workers"]
    if cpu_short:
        w = cpu_short[0][0]
        fit = w.replicas - len(cpu_short)
        tips.append(f"pipeline.num_search_workers={max(1, fit)}: the CPUs left after the model actors hold {fit} "
                    f"search workers of {w.cpus:g} CPU")
    if not gpus and any(p.gpus for p in pool_list):
        tips.append("the cluster has no GPU: actors.generator.num_gpus=0 actors.prm.num_gpus=0 prm.device=cpu, "
                    "and a CPU generator (generator=vllm_tiny, llamacpp or enumerate)")
    return tips


def format_plan(pool_list: Sequence[Pool], nodes: Sequence[Node], placement: Placement, title: str = "") -> str:
    """The plan as text: the cluster, each pool's ask and where its replicas land, and the advice when not."""
    lines = [title] if title else []
    lines.append("cluster: " + "; ".join(f"{n.name} {n.cpus:g} CPU, {n.gpus} GPU" for n in nodes))
    landed: dict[str, list[str]] = {}
    for role, _, where in placement.placed:
        landed.setdefault(role, []).append(where)
    for p in pool_list:
        ask = f"{p.cpus:g} CPU" + (f", {p.gpus:g} GPU" if p.gpus else "") + (
            f", {p.gpu_memory:.2f} of a GPU's memory" if p.gpu_memory else "")
        where = landed.get(p.role, [])
        status = "fits" if len(where) == p.replicas else f"{p.replicas - len(where)} of {p.replicas} DO NOT FIT"
        spots = ", ".join(f"{w} x{where.count(w)}" if where.count(w) > 1 else w for w in dict.fromkeys(where))
        count = f"{p.replicas} (auto)" if p.auto else str(p.replicas)
        lines.append(f"  {p.role:<22} {count} x ({ask})  {status}" + (f"  -> {spots}" if spots else "")
                     + (f"  [{p.note}]" if p.note else ""))
    first: dict[str, tuple[int, str]] = {}
    for pool, _, why in placement.unplaced:
        n, w = first.get(pool.role, (0, why))
        first[pool.role] = (n + 1, w)
    for role, (n, why) in first.items():
        lines.append(f"  not placed: {n} of {role}; the first {why}")
    lines += [f"  memory: {m}" for m in placement.memory_over]
    lines.append("fits" if placement.fits else "DOES NOT FIT; settings that would:")
    lines += [f"  {t}" for t in advice(pool_list, nodes, placement)]
    return "\n".join(lines)


def cluster_nodes() -> tuple[Node, ...]:
    """The alive nodes of the connected Ray cluster, with their total CPUs, GPUs and memory."""
    import ray  # heavy: ray

    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        r = n.get("Resources") or {}
        name = f"{n.get('NodeManagerAddress', '?')}/{str(n.get('NodeID', ''))[:6]}"
        out.append(Node(name, float(r.get("CPU", 0)), int(r.get("GPU", 0)),
                        round(float(r.get("memory", 0)) / 2**30, 1)))
    return tuple(out)


def check_cluster(cfg: Mapping[str, Any], wait_s: float = 60.0, poll_s: float = 5.0) -> Placement:
    """The plan of `cfg` on the connected cluster; while it does not fit, the cluster's nodes are read again for
    up to `wait_s`, with the whole plan asked of Ray's autoscaler (`request_resources`: `ray status -v` shows it,
    and an autoscaling cluster adds the nodes it needs), then PlanError with the plan and the advice. The request
    is withdrawn when the wait ends: from then on the actors' own demands hold the nodes."""
    asked = pools(cfg)
    deadline = time.monotonic() + float(wait_s)
    requested = False
    try:
        while True:
            nodes = cluster_nodes()
            pool_list = fit_auto(asked, nodes)
            placement = place(pool_list, nodes)
            placement.replicas = planned_replicas(pool_list)
            if placement.fits:
                return placement
            if time.monotonic() >= deadline:
                raise PlanError("the evaluation's actors do not fit this Ray cluster (checked for "
                                f"{wait_s:g} s, asking the autoscaler for them; ray.wait_for_nodes_s waits longer "
                                "for it to add nodes):\n" + format_plan(pool_list, nodes, placement))
            if not requested:
                request_demand(demand_bundles(pool_list))
                requested = True
            time.sleep(poll_s)
    finally:
        if requested:
            request_demand([])


def demand_bundles(pool_list: Sequence[Pool]) -> list[dict[str, float]]:
    """What the plan asks of a cluster as the autoscaler's resource bundles: one per replica (a tensor-parallel
    engine: one per GPU, its CPUs on the first)."""
    out: list[dict[str, float]] = []
    for pool in pool_list:
        for _ in range(pool.replicas):
            if pool.tp > 1:
                out += [{"CPU": pool.cpus, "GPU": 1.0}] + [{"GPU": 1.0}] * (pool.tp - 1)
            else:
                out.append({k: v for k, v in (("CPU", pool.cpus), ("GPU", pool.gpus)) if v > 0})
    return [b for b in out if b]


def request_demand(bundles: list[dict[str, float]]) -> None:
    """Ask Ray's autoscaler for `bundles` ([]: withdraw the request)."""
    from ray.autoscaler.sdk import request_resources  # heavy: ray

    request_resources(bundles=bundles)


# ---------------------------------------------------------------- shipped cluster configs as shapes

def rayjob_nodes(path: str | Path) -> tuple[Node, ...]:
    """The nodes of a KubeRay RayJob manifest (its head and each worker group at `replicas`)."""
    spec = yaml.safe_load(Path(path).read_text())["spec"]["rayClusterSpec"]
    head = spec["headGroupSpec"]
    nodes = [_k8s_node("head", head["template"], head.get("rayStartParams") or {})]
    for g in spec.get("workerGroupSpecs") or []:
        for i in range(int(g.get("replicas", 1))):
            nodes.append(_k8s_node(f"{g['groupName']}-{i + 1}", g["template"], g.get("rayStartParams") or {}))
    return tuple(nodes)


def _k8s_node(name: str, template: Mapping[str, Any], params: Mapping[str, Any]) -> Node:
    limits = template["spec"]["containers"][0]["resources"]["limits"]
    gpus = int(params.get("num-gpus", limits.get("nvidia.com/gpu", 0)))
    mem = str(limits.get("memory", "0Gi"))
    return Node(name, float(params.get("num-cpus", limits.get("cpu", 0))), gpus,
                float(mem[:-2]) if mem.endswith("Gi") else 0.0)


def launcher_nodes(path: str | Path, workers: str = "max") -> tuple[Node, ...]:
    """The nodes of a Ray cluster launcher config: the head and each worker type at its min or max count."""
    launcher = yaml.safe_load(Path(path).read_text())
    types = launcher["available_node_types"]
    head = launcher["head_node_type"]
    nodes = [Node("head", float(types[head]["resources"].get("CPU", 0)), int(types[head]["resources"].get("GPU", 0)))]
    for name, t in types.items():
        if name == head:
            continue
        count = int(t.get(f"{workers}_workers", 0))
        nodes += [Node(f"{name}-{i + 1}", float(t["resources"].get("CPU", 0)), int(t["resources"].get("GPU", 0)))
                  for i in range(count)]
    return tuple(nodes)


USAGE = """usage: pcr-ray plan [--shape NAME | --address ADDRESS] [evaluate overrides ...]

The resource plan of an evaluation: every actor pool's CPUs, GPUs and GPU memory share, where each replica
lands, and the settings that make it fit. Without --shape or --address: against every named shape. With
--address: against the running cluster's nodes, and whether pyexec's sandbox (bubblewrap) works on each (exit 1
where the run needs it and a node lacks it).
shapes: """ + ", ".join(SHAPES)


# a plan reads the evaluate config and writes nothing: no run folder, no log file
READ_ONLY = ("hydra.run.dir=.", "hydra.output_subdir=null", "hydra/job_logging=stdout")


def main(argv: list[str]) -> int:
    """Entry point of `pcr-ray plan`: exit 0 when the plan fits every shape asked about, 1 when not."""
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    args, overrides, shape, address = list(argv), [], None, None
    while args:
        a = args.pop(0)
        if a in ("--shape", "--address") and args:
            shape, address = (args.pop(0), address) if a == "--shape" else (shape, args.pop(0))
        elif a.startswith(("--shape=", "--address=")):
            k, _, v = a.partition("=")
            shape, address = (v, address) if k == "--shape" else (shape, v)
        else:
            overrides.append(a)
    if shape and shape not in SHAPES:
        print(f"pcr-ray plan: unknown shape {shape!r}; known: {', '.join(SHAPES)}", file=sys.stderr)
        return 2

    def job(cfg: Any) -> int:
        try:
            plain = to_plain(cfg)
            pool_list = pools(plain)
        except (ValueError, KeyError) as exc:
            print(f"pcr-ray plan: {exc}", file=sys.stderr)
            return 2
        return 0 if show_plan(pool_list, shape, address, needs_sandbox(plain)) else 1

    return run_hydra("plan", "evaluate", [*READ_ONLY, *overrides], job, USAGE)


def needs_sandbox(cfg: Mapping[str, Any]) -> bool:
    """Whether the run executes model-written programs in bubblewrap: pyexec among the methods, sandbox=bwrap."""
    specs = parse_methods(cfg["methods"], cfg["method_generators"], cfg["method_overrides"], cfg["method_prms"])
    return any(s.method == "pyexec" for s in specs) and str(cfg["baselines"]["sandbox"]) == "bwrap"


def show_plan(pool_list: Sequence[Pool], shape: str | None, address: str | None, sandbox: bool = False) -> bool:
    """Print the plan against the shape asked for (the cluster at `address`, or every named shape); whether it
    fits every one. Against a running cluster it also reports, per node, whether pyexec's sandbox works there
    (refusing the run where `sandbox`, the run needs it, and a node lacks it)."""
    if address:
        init_ray({"address": address, "log_to_driver": False})
        shapes = {f"the cluster at {address}": cluster_nodes()}
    else:
        shapes = {shape: SHAPES[shape]} if shape else dict(SHAPES)
    ok = True
    for name, nodes in shapes.items():
        sized = fit_auto(pool_list, nodes)
        placement = place(sized, nodes)
        ok &= placement.fits
        print(format_plan(sized, nodes, placement, title=f"== {name}"))
    if address:
        text, works = format_sandbox(probe_nodes(), sandbox)
        print(text)
        ok &= works
    return ok


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
