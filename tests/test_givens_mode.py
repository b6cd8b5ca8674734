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


def test_a_row_says_what_extraction_did_not_find_and_the_metrics_count_it(problems, tmp_path):
    """extract_failed: '' when the text gave givens and an asked quantity; 'no givens' / 'no asked quantity' when
    not (never under the oracle's gold givens); metrics and the CLI summary count the problems, once each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pcr_ray.pipeline.metrics import compute_metrics, givens_line
    from pcr_ray.pipeline.records import base_record
    from pcr_ray.pipeline.results import RESULT_SCHEMA, SHARDS, normalize_record, read_shards, shard_paths

    full = with_givens(problems[0].to_dict(), "extract")
    assert full["extract_failed"] == "" and json.loads(full["sp_givens"]) and full["sp_target_unit"]
    bare = with_givens({**problems[0].to_dict(), "id": "bare", "text": "Tell me about the weather."}, "extract")
    assert bare["extract_failed"] == "no givens; no asked quantity" and not bare["extract_error"]
    no_target = with_givens({**problems[0].to_dict(), "id": "nt", "text": "A box weighs 5 kg. Describe it."}, "extract")
    assert no_target["extract_failed"] == "no asked quantity", no_target["sp_target_unit"]
    assert with_givens({**problems[0].to_dict(), "text": "Tell me about the weather."}, "gold")["extract_failed"] == ""
    rows = [{**base_record({**r, "method": m}), "correct": False} for r in (full, bare, no_target)
            for m in ("nsprm", "direct")]
    assert [r["extract_failed"] for r in rows[::2]] == ["", "no givens; no asked quantity", "no asked quantity"]
    m = compute_metrics(rows, extra={"givens": "extract"})
    assert m["extraction"] == {"problems": 3, "failed": 2, "by_reason": {"no givens": 1, "no asked quantity": 2}}
    assert m["methods"]["nsprm"]["extract_failed"] == 2
    assert givens_line(m).endswith("extraction incomplete for 2 of 3 problems (no asked quantity in 2, no givens in 1)")
    assert "incomplete" not in givens_line(compute_metrics(rows[:2], extra={"givens": "extract"}))
    # a shard written before the column existed reads with it empty, not as a damaged shard
    old = pa.Table.from_pylist([normalize_record(r) for r in rows], schema=RESULT_SCHEMA).drop_columns(
        ["extract_failed"])
    (tmp_path / SHARDS).mkdir()
    pq.write_table(old, tmp_path / SHARDS / "part-00000.parquet")
    assert shard_paths(tmp_path) and read_shards(tmp_path).column("extract_failed").to_pylist() == [""] * 6
