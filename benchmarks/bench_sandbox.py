"""Start-up cost of the pyexec sandbox: seconds per program inside bubblewrap vs the unconfined path, same run.

Each program runs alternately in both modes (so machine load hits them alike); the medians and their ratio are
reported per program. Writes <cache>/bench/bench_sandbox.json (and benchmarks/results/ with --results).

    .venv/bin/python benchmarks/bench_sandbox.py [--rounds 20] [--results]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from _machine import add_dry_run, dry_run
from _provenance import save

from pcr_ray.baselines.sandbox import SandboxLimits, run_program

PROGRAMS = {
    "print": "print(42)",
    "arithmetic": "import math\nv = 2 * 5\nd = 0.5 * 2 * 5 ** 2\nprint(round(math.hypot(v, d), 3), 'm')",
    "sympy": "import sympy\nx = sympy.symbols('x')\nprint(sympy.solve(3*x + 4 - 25, x)[0])",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20, help="runs of each program in each mode")
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/bench_sandbox.json")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
    warnings.simplefilter("ignore", RuntimeWarning)  # the unconfined mode's warning, once is enough here
    modes = {"bwrap": SandboxLimits(sandbox="bwrap"), "unconfined": SandboxLimits(sandbox="unconfined")}
    times: dict[str, dict[str, list[float]]] = {p: {m: [] for m in modes} for p in PROGRAMS}
    failures: list[str] = []
    for _ in range(args.rounds):
        for prog, code in PROGRAMS.items():
            for mode, lim in modes.items():
                t0 = time.perf_counter()
                r = run_program(code, lim)
                times[prog][mode].append(time.perf_counter() - t0)
                if not r.ok or r.confined != (mode == "bwrap"):
                    failures.append(f"{prog}/{mode}: {r.failure} {r.stderr[-200:]}")
    per_program = {}
    for prog, by_mode in times.items():
        med = {m: statistics.median(v) for m, v in by_mode.items()}
        per_program[prog] = {"median_s": {m: round(x, 4) for m, x in med.items()},
                             "min_s": {m: round(min(v), 4) for m, v in by_mode.items()},
                             "added_s": round(med["bwrap"] - med["unconfined"], 4),
                             "ratio_bwrap_over_unconfined": round(med["bwrap"] / med["unconfined"], 2)}
        print(f"{prog:10s} unconfined {med['unconfined']:.3f}s  bwrap {med['bwrap']:.3f}s  "
              f"(+{med['bwrap'] - med['unconfined']:.3f}s, x{med['bwrap'] / med['unconfined']:.2f})")
    res = {"rounds": args.rounds, "programs": PROGRAMS, "per_program": per_program, "failures": failures,
           "seconds_per_program": "wall time of run_program(): temp folder, process start, program, cleanup"}
    save("bench_sandbox", res, args.results)
    if failures:
        raise SystemExit(f"{len(failures)} runs failed: {failures[:3]}")


if __name__ == "__main__":
    main()
