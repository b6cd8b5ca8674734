"""CPU seconds of a process tree, read from /proc: what a test costs the machine, whatever else runs beside it."""

from __future__ import annotations

import os


def tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds (user + system, with the children each has reaped: a Ray worker's, a subprocess's once waited
    for) of `root` and of every process below it, by PID; empty where /proc is not readable."""
    kids: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for d in names:
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2:].split()  # after "(comm)": state, ppid, ..., utime stime cutime cstime
        kids.setdefault(int(rest[1]), []).append(int(d))
        ticks[int(d)] = sum(int(x) for x in rest[11:15])
    hz = os.sysconf("SC_CLK_TCK")
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in ticks:
            out[pid] = ticks[pid] / hz
        todo += kids.get(pid, [])
    return out


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the tree used between two snapshots: what each process alive at the second gained since the
    first. A process that ended between them counts only where a process of the tree reaped it (its parent waiting
    for it), never negatively; so the figure is a lower bound (a killed cluster node's processes are not counted)."""
    return sum(max(0.0, t - before.get(pid, 0.0)) for pid, t in after.items())
