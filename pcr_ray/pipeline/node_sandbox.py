"""Whether bubblewrap (pyexec's sandbox) works on each node of the connected Ray cluster, probed by a task per node."""

from __future__ import annotations

from collections.abc import Mapping

from pcr_ray.baselines.confine import SandboxUnavailable, require_bwrap


def bwrap_problem() -> str:
    """'' when bubblewrap works on this node, else why not (run as a Ray task on each node)."""
    try:
        require_bwrap()
    except SandboxUnavailable as exc:
        return str(exc).split(":")[0] if "not installed" in str(exc) else str(exc)
    return ""


def cpu_nodes() -> list[dict]:
    """The alive nodes of the connected cluster with CPUs: where search workers, which run pyexec's programs, land."""
    import ray  # heavy: ray

    return [n for n in ray.nodes() if n.get("Alive") and float((n.get("Resources") or {}).get("CPU", 0)) > 0]


def probe_nodes(timeout_s: float = 120) -> dict[str, str]:
    """{node address: '' or why bubblewrap does not work there} for every alive node with CPUs (where search
    workers, which run pyexec's programs, can land)."""
    import ray  # heavy: ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # heavy: ray

    nodes = cpu_nodes()
    probe = ray.remote(num_cpus=0)(bwrap_problem)
    refs = [probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
            for n in nodes]
    return {f"{n['NodeManagerAddress']}/{str(n['NodeID'])[:6]}": why
            for n, why in zip(nodes, ray.get(refs, timeout=timeout_s), strict=True)}


def format_sandbox(problems: Mapping[str, str], needed: bool) -> tuple[str, bool]:
    """The plan's sandbox section for `probe_nodes()`'s answer, and whether the run can go ahead: a node without a
    working bubblewrap stops it only when `needed` (pyexec among the methods with baselines.sandbox=bwrap)."""
    lines = ["== the pyexec sandbox (bubblewrap) on each node" + ("" if needed else "; pyexec is not run")]
    lines += [f"  {node}: {why or 'works'}" for node, why in problems.items()]
    ok = not needed or not any(problems.values())
    if not ok:
        lines.append("DOES NOT RUN pyexec there: use the cluster image's security settings (docs/cluster.md, The "
                     "sandbox on the nodes), drop pyexec from `methods`, or set baselines.sandbox=unconfined")
    return "\n".join(lines), ok
