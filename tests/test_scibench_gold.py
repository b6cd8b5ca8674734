"""Hand-written SciBench gold traces: every one verifies, its answer is the book's (5%) unless flagged, all 34 join."""

from __future__ import annotations

import re

import pytest

from pcr_ray.core.verifier import verify
from pcr_ray.data.givens import normalize_text
from pcr_ray.data.readers import iter_scibench
from pcr_ray.data.scibench_gold import (
    GOLD_PATH,
    SCIBENCH_SOL_BOOKS,
    gold_trace,
    load_scibench_gold,
    read_gold_records,
)
from pcr_ray.grading import grade_problem


@pytest.fixture(scope="module")
def gold(data_dir):
    return load_scibench_gold(data_dir)


def test_the_loader_joins_every_worked_solution_problem(gold, data_dir):
    ids = [p.id for p in iter_scibench(data_dir, books=list(SCIBENCH_SOL_BOOKS))]
    assert len(ids) == 34
    assert sorted(g.id for g in gold) == sorted(ids)
    assert all(g.problem.gold_steps == len(g.problem.gold_trace["steps"]) > 0 for g in gold)
    assert all(g.problem.source == "scibench" for g in gold)  # graded with SciBench's 5%
    assert all(isinstance(m, str) and m for g in gold for m in g.missing_primitives)


def test_every_gold_trace_verifies(gold):
    bad = {g.id: str(v.first_failure) for g in gold if not (v := verify(g.problem.gold_trace)).ok}
    assert not bad


def test_answers_match_the_book_except_the_flagged_misprint(gold):
    for g in gold:
        a = verify(g.problem.gold_trace).answer[0]
        res = grade_problem(a.value, g.problem, pred_unit=a.unit)
        assert res.correct != g.book_error, (g.id, a.value, a.unit, g.problem.answer_value, res.reason)
    flagged = [g for g in gold if g.book_error]
    assert [g.id for g in flagged] == ["scibench/thermo_sol/14.4"]
    # the trace's 493 K is the book's formula on the book's numbers; the printed 4943 K has a stray digit
    assert verify(flagged[0].problem.gold_trace).answer[0].value == pytest.approx(493, rel=0.01)
    assert flagged[0].note


_NUMBER = re.compile(r"[-+−]?\d+(?:,\d{3})*(?:\.\d*)?(?:\s*×\s*10\^\s*([-+−]?\d+))?")
_WORDS = {"one": 1.0, "two": 2.0, "three": 3.0}


def _numbers(text: str) -> list[float]:
    s = normalize_text(text)
    out = []
    for m in _NUMBER.finditer(s):
        mant = m.group(0).split("×")[0].replace(",", "").replace("−", "-").strip()
        out.append(float(mant) * (10.0 ** int(m.group(1).replace("−", "-")) if m.group(1) else 1.0))
    out += [v for w, v in _WORDS.items() if re.search(rf"\b{w}\b", s, re.IGNORECASE)]
    return out


def test_givens_marked_in_text_are_numbers_the_text_states(gold):
    """A given marked in_text has its number (or its negation) in the problem text; the others are the book's."""
    records = {r["id"]: r for r in read_gold_records()}
    for g in gold:
        nums = _numbers(g.problem.text)
        for giv in records[g.id]["givens"]:
            stated = any(abs(abs(giv["value"]) - abs(x)) <= 1e-9 * max(1.0, abs(x)) for x in nums)
            assert stated == giv["in_text"], (g.id, giv["name"], giv["value"])
        assert set(g.givens_not_in_text) == {x["name"] for x in records[g.id]["givens"] if not x["in_text"]}


def test_the_trace_keeps_only_trace_fields_and_the_file_is_packaged():
    rec = read_gold_records()[0]
    assert set(gold_trace(rec)) == {"givens", "steps", "answer"}
    assert all("in_text" not in x for x in gold_trace(rec)["givens"])
    assert GOLD_PATH.name == "scibench_gold.jsonl" and GOLD_PATH.parent.name == "data"


def test_a_record_of_another_data_set_is_a_clear_error(tmp_path, data_dir):
    rec = dict(read_gold_records()[0], id="scibench/fund_sol/nosuch")
    path = tmp_path / "g.jsonl"
    import json

    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match="names no problem"):
        load_scibench_gold(data_dir, path)
