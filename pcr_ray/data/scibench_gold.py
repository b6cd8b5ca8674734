"""Hand-written gold traces of SciBench's worked-solution physics problems, joined to their Problem records.

`scibench_gold.jsonl` (beside this module) holds one line per problem of `fund_sol.json`, `class_sol.json` and
`thermo_sol.json` (34 problems): the problem's id as `iter_scibench` names it, its givens (name, value, unit,
description, and `in_text`: false for a number the book's solution brings in that the problem text does not
state, such as the Sun's mass or a figure's angle), the trace steps written from the book's solution, the answer
(variable and unit), the book's answer and unit, `book_error` where the book's printed answer is wrong, a note, and
`missing_primitives`: the book's formulas the registry has no primitive for, which the trace spells out with
arithmetic (Poiseuille flow, the Sackur-Tetrode entropy, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pcr_ray.data.problem import Problem
from pcr_ray.data.readers import iter_scibench

SCIBENCH_SOL_BOOKS: tuple[str, ...] = ("fund_sol", "class_sol", "thermo_sol")
GOLD_PATH = Path(__file__).with_name("scibench_gold.jsonl")
_TRACE_GIVEN_KEYS = ("name", "value", "unit", "desc")


@dataclass(frozen=True)
class SciBenchGold:
    """A SciBench problem with its hand-written gold trace (`problem.gold_trace`) and what the data says about it."""

    problem: Problem
    givens_not_in_text: tuple[str, ...]
    book_error: bool
    note: str
    missing_primitives: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.problem.id


def read_gold_records(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The records of the gold file (default: the packaged scibench_gold.jsonl), in file order."""
    p = Path(path) if path is not None else GOLD_PATH
    with open(p, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def gold_trace(record: dict[str, Any]) -> dict[str, Any]:
    """The trace dict (givens, steps, answer) of one record; givens keep name, value, unit and description."""
    givens = [{k: g[k] for k in _TRACE_GIVEN_KEYS if k in g} for g in record["givens"]]
    return {"givens": givens, "steps": record["steps"], "answer": record["answer"]}


def load_scibench_gold(data_dir: str | Path | None = None, path: str | Path | None = None) -> list[SciBenchGold]:
    """Every gold record joined to its SciBench Problem (read from `data_dir`, as iter_scibench reads it), in the
    gold file's order; the problem carries the gold trace and its step count. Raises ValueError when a record
    names no problem of the data files or its book answer differs from the data's (the files do not match)."""
    problems = {p.id: p for p in iter_scibench(data_dir, books=list(SCIBENCH_SOL_BOOKS))}
    out: list[SciBenchGold] = []
    for rec in read_gold_records(path):
        p = problems.get(rec["id"])
        if p is None:
            raise ValueError(f"gold record {rec['id']!r} names no problem of {', '.join(SCIBENCH_SOL_BOOKS)} "
                             f"(have {len(problems)} problems); is the SciBench data the repository's e14e0ca?")
        if p.answer_value is None or abs(p.answer_value - float(rec["book_answer"])) > 1e-9 * abs(p.answer_value):
            raise ValueError(f"gold record {rec['id']!r}: its book answer {rec['book_answer']} is not the data's "
                             f"{p.answer_value}")
        trace = gold_trace(rec)
        problem = Problem(id=p.id, source=p.source, text=p.text, answer=p.answer, answer_value=p.answer_value,
                          answer_unit=p.answer_unit, level=p.level, subject=p.subject, gold_trace=trace,
                          gold_steps=len(trace["steps"]))
        out.append(SciBenchGold(problem, tuple(g["name"] for g in rec["givens"] if not g.get("in_text", True)),
                                bool(rec.get("book_error", False)), str(rec.get("note", "")),
                                tuple(rec.get("missing_primitives", ()))))
    return out
