"""Where a search's givens come from: the problem text by default (the gold trace is never read), or the gold
trace as an oracle ablation that every writer names."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pcr_ray.configs import compose
from pcr_ray.data.givens import Extraction, Target
from pcr_ray.data.physics import generate_problems
from pcr_ray.data.problem import Problem
from pcr_ray.pipeline.records import search_problem, with_givens
from pcr_ray.search import SearchProblem

GARBAGE_TRACE = {"givens": [{"name": "zz", "value": 123456.0, "unit": "furlong"}],
                 "answer": [{"name": "zz", "unit": "furlong"}], "steps": "not a list"}


@pytest.fixture(scope="module")
def problems() -> list[Problem]:
    return [p for p in generate_problems(12, seed=0) if p.gold_trace]


def test_extract_is_the_default_of_the_pipeline_and_of_from_problem(problems):
    assert compose("evaluate").pipeline.givens == "extract"
    p = problems[0]
    assert SearchProblem.from_problem(p) == SearchProblem.from_problem(p, givens="extract")
    assert SearchProblem.from_problem(p).givens_source == "extract"


def test_extract_never_reads_the_gold_trace(problems):
    """The same SearchProblem whether the gold trace is there, gone, or garbage (as a Problem and as a row)."""
    for p in problems:
        sp = SearchProblem.from_problem(p, givens="extract")
        assert sp.givens, p.text  # the extractor found something to search from
        for trace in (None, GARBAGE_TRACE):
            assert SearchProblem.from_problem(replace(p, gold_trace=trace), givens="extract") == sp
        row = {**p.to_dict(), "gold_trace": "{not json"}
        assert SearchProblem.from_problem(row, givens="extract") == sp
        assert search_problem(with_givens(row, "extract")) == sp  # the pipeline's path
    # the garbage trace's givens and unit are what gold mode would take: extract took none of them
    sp = SearchProblem.from_problem(replace(problems[0], gold_trace=GARBAGE_TRACE), givens="extract")
    assert "zz" not in {g.name for g in sp.givens} and sp.target_unit != "furlong"


def test_extract_takes_givens_and_target_unit_from_the_extractor(problems):
    class Fixed:
        def extract(self, text: str) -> Extraction:
            return Extraction((), Target(unit="km"))

    sp = SearchProblem.from_problem(problems[0], givens="extract", extractor=Fixed())
    assert sp.givens == () and sp.target_unit == "km"


def test_gold_is_the_oracle_the_gold_trace_gives_givens_and_unit(problems):
    for p in problems:
        sp = SearchProblem.from_problem(p, givens="gold")
        assert [g.name for g in sp.givens] == [g["name"] for g in p.gold_trace["givens"]]
        assert sp.target_unit == p.gold_trace["answer"][0]["unit"] and sp.givens_source == "gold"
    sp = SearchProblem.from_problem(replace(problems[0], gold_trace=GARBAGE_TRACE), givens="gold")
    assert sp.target_unit == "furlong" and [g.name for g in sp.givens] == ["zz"]
    with pytest.raises(ValueError, match="no gold trace.*extract"):
        SearchProblem.from_problem(replace(problems[0], gold_trace=None), givens="gold")
    row = with_givens({**problems[0].to_dict(), "gold_trace": None}, "gold")
    assert "no gold trace" in row["extract_error"]  # the pipeline records it as an error row, not a search


def test_auto_is_gone(problems):
    with pytest.raises(ValueError, match="extract.*gold"):
        SearchProblem.from_problem(problems[0], givens="auto")


def test_evaluate_refuses_an_unknown_givens_mode_before_any_work(tmp_path):
    from pcr_ray.evaluate import compose_config, evaluate

    with pytest.raises(ValueError, match=r"pipeline\.givens\) must be extract"):
        evaluate(compose_config(["experiment=smoke", "pipeline.givens=auto"]), run_dir=tmp_path)
    assert not (tmp_path / "shards").exists()


def test_the_search_benchmark_takes_the_oracle_or_the_gold_ranks_not_both(capsys):
    from pcr_ray.bench import search_methods

    with pytest.raises(SystemExit):
        search_methods.main(["--oracle", "--gold-ranks", "--physics", "1", "--gsm8k", "0"])
    assert "leave out --oracle" in capsys.readouterr().err


def test_a_problem_row_round_trips_through_the_work_item(problems):
    row = with_givens(json.loads(json.dumps(problems[0].to_dict())), "gold")
    assert row["givens_source"] == "gold" and not row["extract_error"]
    assert search_problem(row) == SearchProblem.from_problem(problems[0], givens="gold")
