"""CPU seconds of a process tree, read from /proc: what a test costs the machine, whatever else runs beside it."""

from __future__ import annotations

import os


def tree_cpu_s(root: int) -> float:
    """User and system CPU seconds of `root` and every process below it, with the children each has reaped (a Ray
    worker's, a subprocess's once waited for); 0 where /proc is not readable."""
    kids: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
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
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += kids.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")
