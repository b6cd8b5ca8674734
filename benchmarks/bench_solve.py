"""`pcr-ray solve` with its defaults on short textbook physics and word problems: answers right, seconds per problem.

The one-minute path: each problem below (one to three steps, worded as a textbook states them, none from the
project's generated templates or from GSM8K; physics and word problems reported apart) is solved with `pcr-ray
solve`'s defaults (conf/solve.yaml: the rule-based givens extractor, the typed enumerator, nsprm with the quick
shared-context PRM), the scorer loaded once as the command does. An answer is right when it is within 2% of the
book value in SI units. Reports accuracy and the median and largest seconds a problem (search and extraction; the
PRM loaded beforehand, as it is after a first solve). The README's solve examples are among the problems
(tests/test_solve_examples.py checks that they are).

Start-up, in fresh processes, each measured `--repeats` times in this run: the whole `pcr-ray solve` command on a
word problem (the PRM cached), and loading the PRM and scoring one pair the way the scorer does (a BERT-family
checkpoint without transformers, pcr_ray.prm.bert) against loading it through transformers' own model.

    .venv/bin/python benchmarks/bench_solve.py [overrides ...] [--name bench_solve] [--results]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _machine import add_dry_run, dry_run, machine_info, write_result  # noqa: E402

# (problem text, book answer, its unit)
PROBLEMS: tuple[tuple[str, float, str], ...] = (
    ("A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?", 25.0, "m"),
    ("A 2 kg block is pushed with a net force of 10 N. What is its acceleration?", 5.0, "m/s^2"),
    ("A car travels 150 km in 2 hours. What is its average speed?", 20.833, "m/s"),
    ("A 1500 kg car moves at 20 m/s. What is its kinetic energy?", 300000.0, "J"),
    ("A ball is dropped from a height of 20 m. How long does it take to reach the ground?", 2.0196, "s"),
    ("A spring with spring constant 200 N/m is compressed by 0.1 m. How much energy does it store?", 1.0, "J"),
    ("A 5 kg box is lifted 3 m. How much gravitational potential energy does it gain?", 147.1, "J"),
    ("A force of 50 N pushes a crate 4 m along the floor in the direction of the force. How much work is done?",
     200.0, "J"),
    ("A current of 2 A flows through a 6 ohm resistor. What is the voltage across it?", 12.0, "V"),
    ("A wave has a frequency of 50 Hz and a wavelength of 2 m. What is its speed?", 100.0, "m/s"),
    ("A 0.5 kg ball moves at 4 m/s. What is its momentum?", 2.0, "kg*m/s"),
    ("A simple pendulum is 1 m long. What is its period?", 2.006, "s"),
)
# short word problems of one or two arithmetic steps, written for this benchmark (none from GSM8K) while the
# extractor's rate rules were written: their phrasings are seen by those rules
WORD_PROBLEMS: tuple[tuple[str, float, str], ...] = (
    ("A farmer harvests 8 sacks of oranges. Each sack contains 35 oranges. How many oranges does he harvest?",
     280.0, "orange"),
    ("Each cookie costs $2. Maria buys 5 cookies. How much does she spend?", 10.0, "USD"),
    ("A class has 12 boys and 15 girls. How many students are in the class?", 27.0, "student"),
    ("A baker has 60 muffins and packs them in boxes of 6 muffins each. How many boxes does he fill?", 10.0, "box"),
    ("Tom reads 20 pages a day. How many pages does he read in 7 days?", 140.0, "page"),
    ("A ticket costs $12. How much do 4 tickets cost?", 48.0, "USD"),
    ("Sam had 45 marbles and gave 17 marbles to his friend. How many marbles does Sam have now?", 28.0, "marble"),
    ("A worker earns $15 an hour. How much does she earn in 8 hours?", 120.0, "USD"),
)


def right(value: float | None, unit: str | None, book: float, book_unit: str) -> bool:
    """Whether an answer equals the book's within 2% (pcr_ray.grading, the answer converted into the book's unit)."""
    from pcr_ray.grading import grade_numeric

    if value is None or not unit:
        return False
    return grade_numeric(value, book, unit=book_unit, pred_unit=unit, rel_tol=0.02).correct


SOLVE_TEXT = WORD_PROBLEMS[0][0]
LOAD = {  # a fresh interpreter: import, load the checkpoint, score one pair
    "scorer": "from pcr_ray.prm.scorer import PRMScorer; s = PRMScorer.from_checkpoint(CK)",
    "transformers": ("from pcr_ray.prm.model import load_checkpoint; from pcr_ray.prm.scorer import PRMScorer; "
                     "m, t, meta = load_checkpoint(CK); s = PRMScorer(m, t, max_length=meta.max_length)"),
}


def startup(checkpoint: str, overrides: list[str], repeats: int) -> dict:
    """Seconds (median and all) of fresh processes: the `pcr-ray solve` command, and the two ways to load the PRM."""
    import subprocess
    import sys

    def wall(cmd: list[str]) -> float:
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
        return time.perf_counter() - t

    cli = [sys.executable, "-m", "pcr_ray.cli", "solve", SOLVE_TEXT, *overrides]
    runs: dict[str, list[float]] = {"solve_command": [], **{k: [] for k in LOAD}}
    for _ in range(repeats):  # interleaved, so that a slow moment of the machine falls on every kind alike
        runs["solve_command"].append(wall(cli))
        for kind, code in LOAD.items():
            body = code.replace("CK", repr(checkpoint)) + "; s.score([('a problem', 'a step')])"
            runs[kind].append(wall([sys.executable, "-c", body]))
    out = {k: {"median_s": round(statistics.median(v), 2), "runs_s": [round(x, 2) for x in v]} for k, v in runs.items()}
    out["transformers_over_scorer"] = round(out["transformers"]["median_s"] / out["scorer"]["median_s"], 2)
    out["solve_text"] = SOLVE_TEXT
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="solve config overrides (key=value), as on the command line")
    ap.add_argument("--name", default="bench_solve")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per start-up measurement")
    ap.add_argument("--results", action="store_true", help="also write benchmarks/results/NAME.json")
    add_dry_run(ap)
    args = ap.parse_args()

    from pcr_ray.solve import compose, load_scorer, solve

    cfg = compose(args.overrides)
    if args.dry_run:
        raise SystemExit(dry_run(__file__, {**vars(args), "config": cfg}))
    t0 = time.perf_counter()
    scorer = load_scorer(cfg["prm"])
    load_s = time.perf_counter() - t0
    rows = []
    for group, text, book, unit in [("physics", *p) for p in PROBLEMS] + [("word", *p) for p in WORD_PROBLEMS]:
        t = time.perf_counter()
        res, _ = solve(text, cfg, scorer=scorer)
        secs = time.perf_counter() - t
        ok = right(res.answer_value, res.answer_unit, book, unit)
        answer = None if res.answer_value is None else f"{res.answer_value:.6g} {res.answer_unit}"
        rows.append({"group": group, "problem": text, "book": f"{book:g} {unit}", "answer": answer, "right": ok,
                     "seconds": round(secs, 2),
                     "prm_calls": res.n_prm_calls, "steps": [s["step"] for s in res.steps], "stop": res.stop_reason})
        print(f"{'RIGHT' if ok else 'wrong'} {secs:5.1f}s  {rows[-1]['answer']!s:>18}  (book {book:g} {unit})  "
              f"{text[:70]}", flush=True)
    ck = str(scorer.identity["checkpoint"])
    res: dict = {"machine": machine_info(), "overrides": args.overrides, "scorer_load_s": round(load_s, 2),
                 "startup": startup(ck, args.overrides, args.repeats)}
    st = res["startup"]
    print(f"start-up (median of {args.repeats}): `pcr-ray solve` {st['solve_command']['median_s']} s; the PRM loaded "
          f"and one pair scored {st['scorer']['median_s']} s, through transformers {st['transformers']['median_s']} s")
    for group in ("physics", "word"):
        part = [r for r in rows if r["group"] == group]
        secs = [r["seconds"] for r in part]
        n_right = sum(r["right"] for r in part)
        res[group] = {"n_problems": len(part), "n_right": n_right, "accuracy": round(n_right / len(part), 4),
                      "median_s": round(statistics.median(secs), 2), "max_s": max(secs)}
        print(f"{group}: {n_right}/{len(part)} right; median {res[group]['median_s']} s, max {res[group]['max_s']} s "
              "a problem")
    res["problems"] = rows
    write_result(args.name, res, commit=args.results or None)


if __name__ == "__main__":
    main()
