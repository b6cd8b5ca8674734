"""Answers of several search runs on the same problems, combined offline: by any run, a vote, the best score.

Reads `bench_search_methods.py` record files (`<cache>/bench/<name>_records.jsonl`) of runs over the same
problems (other PRMs, enumerator seeds) and reports, per dataset: each run's accuracy, the problems at least one
run solves (the ceiling of any way of combining them), and three combinations of their answers: a majority vote
(ties by the best trace score), a vote weighted by trace score, and the single best-scored answer. Answers are
one when they state the same quantity (the search's `answer_quantity`: dimension and SI value). No search is
run (seconds); writes <cache>/bench/NAME.json
(benchmarks/results/ too with PCR_RAY_BENCH_RESULTS=1).

    .venv/bin/python benchmarks/bench_answer_vote.py seed13_enum0 seed13_enum1 seed13_enum2   # --name of each run
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from _machine import add_dry_run, dry_run, machine_info, records_path, write_result

from pcr_ray.core.units import try_unit_info
from pcr_ray.grading import grade_numeric
from pcr_ray.search.selection import Answered, answer_quantity, select_answered


def load_run(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    """{(dataset, problem id): record with a `correct` field} of one run's record file."""
    path = records_path(name)
    if not path.exists():
        raise SystemExit(f"no record file {path}: run bench_search_methods.py --name {name} first")
    out = {}
    with open(path) as fh:
        for line in fh:
            r = json.loads(line)
            r["correct"] = bool(r.get("answered") and r.get("answer_value") is not None and grade_numeric(
                r["answer_value"], r["gold_value"], unit=r.get("gold_unit") or "", pred_unit=r.get("answer_unit")
            ).correct)
            out[(r["dataset"], r["id"])] = r
    return out


def answered(r: dict[str, Any], order: int) -> Answered | None:
    """A record's answer as the search's selection sees it (its score and SI quantity), or None without one."""
    info = try_unit_info(r.get("answer_unit") or "dimensionless")
    if not r.get("answered") or r.get("answer_value") is None or info is None:
        return None
    quantity = answer_quantity(info.dims, info.to_base(float(r["answer_value"])))
    return Answered(float(r.get("score") or 0.0), order, quantity)


def combine(records: list[dict[str, Any]], how: str) -> bool:
    """Whether the answer chosen among one problem's records is correct. `vote`: the most runs behind an answer
    (ties by the best score); `weighted` and `best`: the search's own `vote` and `best` selections."""
    pairs = [(a, r["correct"]) for i, r in enumerate(records) if (a := answered(r, i)) is not None]
    if not pairs:
        return False
    if how == "vote":
        count = Counter(a.quantity for a, _ in pairs)
        pairs = [p for p in pairs if count[p[0].quantity] == max(count.values())]
        how = "best"
    items = [a for a, _ in pairs]
    return pairs[select_answered(items, "vote" if how == "weighted" else how)][1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="record-file names under <cache>/bench/ (without _records.jsonl)")
    ap.add_argument("--name", default="bench_answer_vote")
    add_dry_run(ap)
    args = ap.parse_args()
    if args.dry_run:
        raise SystemExit(dry_run(__file__, vars(args)))
    runs = [load_run(n) for n in args.runs]
    keys = sorted(set.intersection(*(set(r) for r in runs)))
    if not keys:
        raise SystemExit("the runs share no problems")
    out: dict[str, Any] = {"machine": machine_info(), "runs": args.runs, "datasets": {}}
    for dataset in sorted({d for d, _ in keys}):
        ids = [k for k in keys if k[0] == dataset]
        row: dict[str, Any] = {"n": len(ids), "runs": {n: sum(r[k]["correct"] for k in ids)
                                                      for n, r in zip(args.runs, runs, strict=True)}}
        row["solved_by_any"] = sum(any(r[k]["correct"] for r in runs) for k in ids)
        for how in ("vote", "weighted", "best"):
            row[how] = sum(combine([r[k] for r in runs], how) for k in ids)
        out["datasets"][dataset] = row
        print(f"{dataset}: n {row['n']}  per run {list(row['runs'].values())}  any {row['solved_by_any']}  "
              f"vote {row['vote']}  weighted {row['weighted']}  best-scored {row['best']}")
    write_result(args.name, out)


if __name__ == "__main__":
    main()
