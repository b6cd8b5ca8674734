"""math-verify in worker processes that can be killed: a call that outlives its timeout takes its worker down.

SymPy cannot be interrupted from another thread, so a pathological answer ('9...9^9...9') would keep a core busy
for as long as it likes inside the grading process (a Ray worker, say). Here each call runs in a child process
(`python -m pcr_ray.mathverify`, one JSON line in, one out); a child that has not answered within the timeout
is killed and the next call starts a fresh one. Children are reused between calls, at most `size` at once.

A call's timeout counts the child's CPU time, not the wall clock: on a loaded machine (a test suite, a busy Ray
node) a child that waits for a core is not killed for waiting; one that computes for `timeout_s` is. The wall
clock still bounds a call at `WALL_FACTOR` times its timeout.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a child's start (Python, SymPy, ANTLR, a first call) is not counted in a call's timeout
WALL_FACTOR = 3.0  # a call ends after this many times its timeout in wall time, however little CPU it got
_POLL_S = 0.05
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Verdict:
    """What one math-verify call gave: `equal`, or why there is no answer (`timed_out` / `error`)."""

    equal: bool = False
    timed_out: bool = False
    error: str = ""


class WorkerError(RuntimeError):
    """A worker process could not be started or stopped answering."""


def as_latex(answer: str) -> str:
    """`answer` as math-verify reads it: in `$...$` unless it is already boxed or in dollars."""
    s = answer.strip()
    if "\\boxed" in s or "$" in s:
        return s
    return f"${s}$"


class _Worker:
    """One child process running `serve_forever`."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "pcr_ray.mathverify"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        if self._read(START_TIMEOUT_S, cpu_time=False) != {"ready": True}:
            self.kill()
            raise WorkerError("the math-verify worker did not start (is math-verify installed?)")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the child has used so far; None where /proc cannot tell (not Linux)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime: fields 14, 15 of proc(5)

    def _wait(self, timeout_s: float) -> bool:
        """Wait for an answer line until the child used `timeout_s` of CPU (or WALL_FACTOR times it passed)."""
        assert self.proc.stdout is not None
        t0, cpu0 = time.monotonic(), self.cpu_seconds()
        while True:
            waited = time.monotonic() - t0
            if select.select([self.proc.stdout], [], [], min(_POLL_S, max(0.0, timeout_s - waited)))[0]:
                return True
            waited = time.monotonic() - t0
            if waited < timeout_s:
                continue
            cpu = self.cpu_seconds()
            if cpu is None or cpu0 is None or cpu - cpu0 >= timeout_s or waited >= WALL_FACTOR * timeout_s:
                return False

    def _read(self, timeout_s: float, *, cpu_time: bool = True) -> dict[str, Any] | None:
        """The child's next answer line, or None when it gives none within `timeout_s` (of its CPU time)."""
        assert self.proc.stdout is not None
        if cpu_time:
            ready = self._wait(timeout_s)
        else:
            ready = bool(select.select([self.proc.stdout], [], [], max(0.0, timeout_s))[0])
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError("the math-verify worker exited")
        return json.loads(line)

    def call(self, pred: str, gold: str, timeout_s: float) -> dict[str, Any] | None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps([pred, gold]) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise WorkerError(f"the math-verify worker is gone: {exc}") from None
        return self._read(timeout_s)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


class MathVerifyPool:
    """Up to `size` reused math-verify worker processes; a call waits for a free one.

    `check(pred, gold, timeout_s)` never raises. Counters: `started` and `killed` workers.
    """

    def __init__(self, size: int = 2) -> None:
        self.size = max(1, int(size))
        self._idle: list[_Worker] = []
        self._busy = 0
        self._cond = threading.Condition()
        self.started = 0
        self.killed = 0

    def _take(self) -> _Worker:
        with self._cond:
            while not self._idle and self._busy >= self.size:
                self._cond.wait()
            self._busy += 1
            if self._idle:
                return self._idle.pop()
        try:
            w = _Worker()
        except BaseException:
            self._give(None)
            raise
        with self._cond:
            self.started += 1
        return w

    def _give(self, worker: _Worker | None) -> None:
        with self._cond:
            self._busy -= 1
            if worker is not None:
                self._idle.append(worker)
            self._cond.notify()

    def check(self, pred: str, gold: str, timeout_s: float) -> Verdict:
        """Whether math-verify finds `pred` equal to `gold`, within `timeout_s` seconds of the worker's CPU time."""
        try:
            worker = self._take()
        except (WorkerError, OSError) as exc:
            return Verdict(error=str(exc)[:120])
        try:
            out = worker.call(pred, gold, timeout_s)
        except (WorkerError, OSError, ValueError) as exc:
            worker.kill()
            self._give(None)
            return Verdict(error=str(exc)[:120])
        if out is None:  # still computing: kill it (SymPy cannot be interrupted), the next call starts another
            worker.kill()
            with self._cond:
                self.killed += 1
            self._give(None)
            log.debug("math-verify worker %d killed after %.3g s", worker.pid, timeout_s)
            return Verdict(timed_out=True)
        self._give(worker)
        if "err" in out:
            return Verdict(error=str(out["err"]))
        return Verdict(equal=bool(out.get("ok")))

    def pids(self) -> list[int]:
        """The process ids of the idle workers."""
        with self._cond:
            return [w.pid for w in self._idle]

    def close(self) -> None:
        """Stop the idle workers (busy ones stop when their call ends: they are not returned)."""
        with self._cond:
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()


_POOL: tuple[int, MathVerifyPool] | None = None  # (the process that made it, the pool): a fork makes its own
_POOL_LOCK = threading.Lock()


def pool() -> MathVerifyPool:
    """This process's pool (created on first use, its workers stopped at exit)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            p = MathVerifyPool()
            atexit.register(p.close)
            _POOL = (os.getpid(), p)
        return _POOL[1]


def _verify_pair(pred: str, gold: str) -> bool:
    from math_verify import parse, verify  # the child's one job; SymPy and ANTLR load here, not in the parent

    g = parse(as_latex(gold), parsing_timeout=None)  # type: ignore[arg-type]
    p = parse(as_latex(pred), parsing_timeout=None)  # type: ignore[arg-type]
    if not g or not p:
        return False
    return bool(verify(g, p, timeout_seconds=None))


def serve_forever() -> None:
    """The child: read `[pred, gold]` lines on stdin, answer `{"ok": bool}` or `{"err": str}` lines on stdout."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the libraries print goes to stderr, not into the answers
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _verify_pair("x^2+2x+1", "(x+1)^2")  # loads math_verify, SymPy's simplifier and the LaTeX parser before
    # "ready" (the first call costs ~0.8 s of CPU, the next ones milliseconds): a call's timeout covers it alone

    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        try:
            pred, gold = json.loads(line)
            msg: dict[str, Any] = {"ok": _verify_pair(str(pred), str(gold))}
        except Exception as exc:  # noqa: BLE001 - any failure of the checker is an answer, not a crash
            msg = {"err": f"{type(exc).__name__}: {exc}"[:120]}
        out.write(json.dumps(msg) + "\n")


if __name__ == "__main__":
    serve_forever()
