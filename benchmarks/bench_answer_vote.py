"""Answers of several search runs on the same problems, combined offline: by any run, a vote, the best score.

Reads `bench_search_methods.py` record files (`benchmarks/results/<name>_records.jsonl`) of runs over the same
problems (other PRMs, enumerator seeds) and reports, per dataset: each run's accuracy, the problems at least one
run solves (the ceiling of any way of combining them), and three combinations of their answers: a majority vote
(ties by the best trace score), a vote weighted by trace score, and the single best-scored answer. Answers are
one when their units and values (4 significant digits) agree. No search is run (seconds); writes
benchmarks/results/NAME.json.

    .venv/bin/python benchmarks/bench_answer_vote.py search_settings/seed13_listwise3_min_roles \
        search_settings/seed13_listwise3_min_roles_enum1 search_settings/seed13_listwise3_min_roles_enum2
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

from _machine import RESULTS, machine_info, write_result

from pcr_ray.grading import grade_numeric


def load_run(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    """{(dataset, problem id): record with a `correct` field} of one run's record file."""
    path = RESULTS / f"{name}_records.jsonl"
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


def answer_key(r: dict[str, Any]) -> tuple[str, float] | None:
    if not r.get("answered") or r.get("answer_value") is None:
        return None
    return (r.get("answer_unit") or "", float(f"{float(r['answer_value']):.4g}"))


def combine(records: list[dict[str, Any]], how: str) -> bool:
    """Whether the answer chosen among one problem's records by `how` (vote | weighted | best) is correct."""
    groups: dict[tuple[str, float], list[tuple[float, bool]]] = defaultdict(list)
    for r in records:
        key = answer_key(r)
        if key is not None:
            groups[key].append((float(r.get("score") or 0.0), r["correct"]))
    if not groups:
        return False
    rank = {"vote": lambda g: (len(g), max(s for s, _ in g)),
            "weighted": lambda g: sum(s for s, _ in g),
            "best": lambda g: max(s for s, _ in g)}[how]
    return max(groups.values(), key=rank)[0][1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="record-file names under benchmarks/results/ (without _records.jsonl)")
    ap.add_argument("--name", default="bench_answer_vote")
    args = ap.parse_args()
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
