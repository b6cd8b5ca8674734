"""Pure parts of the evaluation pipeline: result shards and resume keys, error classification, metrics."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from pcr_ray.pipeline.metrics import (
    classify_error,
    compare_with_gold,
    compute_metrics,
    horizon_of,
    is_unit_slip,
    markdown_table,
    template_split_table,
)
from pcr_ray.pipeline.results import (
    RESULT_SCHEMA,
    ShardWriter,
    completed_keys,
    merge,
    normalize_record,
    read_results,
    read_shards,
)
from pcr_ray.pipeline.stats import wilson

GIVENS = [{"name": "a", "value": 3, "unit": "dimensionless"}, {"name": "b", "value": 4, "unit": "dimensionless"},
          {"name": "c", "value": 10, "unit": "dimensionless"}]


def step(op: str, out: str, **args: str) -> dict:
    return {"op": op, "args": args, "out": {"name": out, "unit": "dimensionless"}}


GOLD = {"givens": GIVENS, "steps": [step("mul", "p", x="a", y="b"), step("add", "q", x="p", y="c")],
        "answer": [{"name": "q", "unit": "dimensionless"}]}  # 3*4 + 10 = 22


def wrong_row(trace: dict | None, value: float, **kw) -> dict:
    return {"correct": False, "answered": True, "error": "", "stop_reason": "answered", "answer_value": value,
            "gold_value": 22.0, "trace_json": json.dumps(trace) if trace else "", **kw}


def test_formula_misuse_is_a_different_op_at_the_first_divergent_step():
    pred = {**GOLD, "steps": [step("add", "p", x="a", y="b"), step("add", "q", x="p", y="c")]}  # 3+4+10
    kind, detail = classify_error(wrong_row(pred, 17.0), GOLD)
    assert kind == "formula_misuse"
    assert "add" in detail and "mul" in detail


def test_wrong_variable_is_the_same_op_on_other_quantities():
    pred = {**GOLD, "steps": [step("mul", "p", x="a", y="c"), step("add", "q", x="p", y="b")]}  # 30+4
    assert classify_error(wrong_row(pred, 34.0), GOLD)[0] == "wrong_variable"


def test_on_track_steps_but_answering_an_intermediate_is_a_wrong_variable():
    pred = {**GOLD, "steps": [step("mul", "p", x="a", y="b")], "answer": [{"name": "p", "unit": "dimensionless"}]}
    kind, detail = compare_with_gold(pred, GOLD)
    assert kind == "wrong_variable" and "every step" in detail


def test_rejected_trace_is_classified_by_its_diagnostic():
    bad_unit = {"givens": [{"name": "d", "value": 3, "unit": "m"}, {"name": "t", "value": 2, "unit": "s"}],
                "steps": [{"op": "add", "args": {"x": "d", "y": "t"}, "out": {"name": "z", "unit": "m"}}],
                "answer": [{"name": "z", "unit": "m"}]}
    assert classify_error(wrong_row(bad_unit, 5.0), None)[0] == "unit"
    bad_arith = {**GOLD, "steps": [{**step("mul", "p", x="a", y="b"), "value": 13}, step("add", "q", x="p", y="c")]}
    assert classify_error(wrong_row(bad_arith, 23.0), GOLD)[0] == "arithmetic"


def test_unit_slip_no_answer_parse_and_correct():
    assert is_unit_slip(22000.0, 22.0) and is_unit_slip(22 / 3.6, 22.0) and not is_unit_slip(23.0, 22.0)
    assert classify_error(wrong_row(None, 22000.0), None)[0] == "unit"
    assert classify_error({"correct": False, "answered": False, "stop_reason": "dead_end"}, GOLD)[0] == "no_answer"
    assert classify_error({"correct": False, "answered": False, "stop_reason": "parse_error"}, None)[0] == "parse"
    assert classify_error({"correct": True}, GOLD) == ("", "")
    assert classify_error(wrong_row(None, 23.0), None)[0] == "unattributed"
    assert classify_error({"correct": False, "error": "RayActorError: boom"}, None)[0] == "pipeline_error"


def test_horizon_and_wilson():
    assert horizon_of(None) == "unknown" and horizon_of(4) == "short" and horizon_of(5) == "long"
    lo, hi = wilson(5, 10)
    assert lo < 0.5 < hi and 0.18 < lo < 0.25
    assert wilson(0, 0) == (0.0, 0.0)


def _row(pid: str, method: str, correct: bool, answered: bool, horizon: str, **kw) -> dict:
    return {"problem_id": pid, "method": method, "correct": correct, "answered": answered, "horizon": horizon,
            "silent_failure": answered and not correct, "error_type": "" if correct else
            ("no_answer" if not answered else "unit"), "candidates": 10, "prm_calls": 2, "source": "physics", **kw}


def test_compute_metrics_counts_accuracy_silent_failures_by_horizon():
    rows = [_row("p1", "nsprm", True, True, "short"), _row("p2", "nsprm", False, True, "long"),
            _row("p3", "nsprm", False, False, "long"), _row("p4", "nsprm", True, True, "short"),
            _row("p1", "greedy", False, True, "short"), _row("p2", "greedy", False, True, "long"),
            _row("p3", "greedy", True, True, "long"), _row("p4", "greedy", False, True, "short")]
    m = compute_metrics(rows, ["greedy", "nsprm"])
    assert list(m["methods"]) == ["greedy", "nsprm"]
    ns = m["methods"]["nsprm"]
    assert ns["n"] == 4 and ns["acc"] == 0.5 and ns["silent_failures"] == 1
    assert ns["silent_failure_rate_long"] == 0.5 and ns["silent_failure_rate_short"] == 0.0
    assert ns["error_types"]["unit"] == 1 and ns["error_types"]["no_answer"] == 1
    g = m["methods"]["greedy"]
    assert g["acc"] == 0.25 and g["silent_failure_rate"] == 0.75 and g["mean_candidates"] == 10
    assert m["n_problems"] == 4 and m["n_rows"] == 8
    table = markdown_table(m)
    assert "| nsprm | 4 | 50.0 |" in table and "| greedy | 4 | 25.0 |" in table


def test_generated_physics_accuracy_is_reported_by_template_split_from_a_results_table(tmp_path):
    """Rows of real problems through base_record and a results parquet: seen and unseen templates are two rows."""
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.pipeline.records import base_record

    problems = generate_problems(6, seed=2, split="heldout") + generate_problems(4, seed=2, split="train")
    recs = []
    for i, p in enumerate(problems):  # nsprm: 5 of 6 unseen right, 1 of 4 seen; greedy: every unseen one wrong
        held = i < 6
        for method, ok in (("nsprm", i != 0 if held else i == 6), ("greedy", not held)):
            recs.append({**base_record({**p.to_dict(), "method": method}), "correct": ok, "answered": True})
    recs.append({"problem_id": "gsm8k/1", "source": "gsm8k_test", "method": "nsprm", "correct": True})
    ShardWriter(tmp_path).write(recs)
    rows = read_results(merge(tmp_path)).to_pylist()
    assert {r["template_split"] for r in rows} == {"heldout", "train", ""}
    m = compute_metrics(rows, ["nsprm", "greedy"])
    ns, gr = m["methods"]["nsprm"]["by_template_split"], m["methods"]["greedy"]["by_template_split"]
    assert (ns["heldout"]["n"], ns["heldout"]["correct"], ns["train"]["n"], ns["train"]["correct"]) == (6, 5, 4, 1)
    assert gr["heldout"]["acc"] == 0.0 and gr["train"]["acc"] == 1.0
    assert ns["heldout"]["acc_ci95"] == list(wilson(5, 6))
    table = template_split_table(m).splitlines()
    assert "| nsprm | unseen templates | 6 | 83.3 |" in table[2] and "| nsprm | seen templates | 4 | 25.0 |" in table[3]
    assert "| greedy | unseen templates | 6 | 0.0 |" in table[4] and len(table) == 6
    # rows that carry no template split (other data sets, old runs) give no such rows
    assert template_split_table(compute_metrics([r for r in rows if not r["template_split"]])) == ""


def test_shards_resume_keys_and_merge_prefer_successful_rows(tmp_path):
    w = ShardWriter(tmp_path, "r1")
    w.write([{"problem_id": "p1", "method": "nsprm", "correct": True, "answered": True, "novel_key": 7},
             {"problem_id": "p2", "method": "nsprm", "error": "RayActorError: died", "answered": False}])
    assert w.write([]) is None
    w2 = ShardWriter(tmp_path, "r2")  # a resumed run: the failed row is done again, successfully
    w2.write([{"problem_id": "p2", "method": "nsprm", "correct": False, "answered": True}])
    assert (tmp_path / "shards").is_dir() and len(list((tmp_path / "shards").glob("*.tmp"))) == 0
    assert read_shards(tmp_path).num_rows == 3
    assert completed_keys(tmp_path) == {("p1", "nsprm"), ("p2", "nsprm")}
    merged = read_results(merge(tmp_path)).to_pylist()
    assert len(merged) == 2
    p2 = next(r for r in merged if r["problem_id"] == "p2")
    assert p2["error"] == "" and p2["answered"] is True
    p1 = next(r for r in merged if r["problem_id"] == "p1")
    assert json.loads(p1["extra_json"]) == {"novel_key": 7}
    assert pq.read_schema(tmp_path / "results.parquet").names == RESULT_SCHEMA.names


def test_error_rows_are_not_done_when_retrying_errors_and_corrupt_shards_are_skipped(tmp_path):
    w = ShardWriter(tmp_path)
    w.write([{"problem_id": "p1", "method": "m", "error": "boom"}])
    assert completed_keys(tmp_path) == set()
    assert completed_keys(tmp_path, retry_errors=False) == {("p1", "m")}
    (tmp_path / "shards" / "part-999999-bad.parquet").write_bytes(b"not parquet")
    assert read_shards(tmp_path).num_rows == 1


@pytest.mark.parametrize("value,expect", [(float("nan"), None), (float("inf"), None), (2, 2.0)])
def test_normalize_record_cleans_numbers(value, expect):
    rec = normalize_record({"problem_id": "x", "method": "m", "answer_value": value, "n_steps": None})
    assert rec["answer_value"] == expect and rec["n_steps"] == 0 and rec["answer"] == ""


def test_dataset_limit_method_specs_and_method_major_work_items():
    from omegaconf import OmegaConf

    from pcr_ray.evaluate import compose_config, load_problems
    from pcr_ray.pipeline.search_batch import parse_methods, work_items

    cfg = compose_config(["experiment=smoke", "dataset.limit=2"])
    problems = load_problems(OmegaConf.to_container(cfg.dataset))
    assert len(problems) == 2 and all(p.source == "physics" and p.gold_trace for p in problems)
    specs = parse_methods(["nsprm", "direct@llm", {"label": "b1", "method": "greedy", "overrides": {"k": 2}}],
                          {"nsprm": "typed"}, {"greedy": {"max_steps": 3}})
    assert [(s.label, s.method, s.generator) for s in specs] == [("nsprm", "nsprm", "typed"),
                                                                  ("direct@llm", "direct", "llm"),
                                                                  ("b1", "greedy", "default")]
    assert specs[2].overrides == {"max_steps": 3, "k": 2} and specs[1].is_baseline
    items = work_items(problems, specs, done={(problems[0].id, "nsprm")})
    assert [(i["id"], i["method"]) for i in items] == [
        (problems[1].id, "nsprm"), (problems[0].id, "direct@llm"), (problems[1].id, "direct@llm"),
        (problems[0].id, "b1"), (problems[1].id, "b1")]
    assert all(s.prm == "default" for s in specs)
    specs = parse_methods(["nsprm", "prm_only", {"label": "po2", "method": "prm_only", "prm": "other"}],
                          method_prms={"prm_only": "baseline"})
    assert [s.prm for s in specs] == ["default", "baseline", "other"]
    with pytest.raises(ValueError, match="duplicate method labels"):
        parse_methods(["nsprm", "nsprm"])


def test_search_options_by_source_sit_between_the_search_group_and_the_method():
    from pcr_ray.pipeline.search_batch import check_search_configs, parse_methods, search_config_for

    nsprm, greedy, direct = parse_methods(["nsprm", "greedy", "direct@llm"], method_overrides={"greedy": {"k": 3}})
    search = {"beam_width": 2, "aggregate": "min", "k": 8}
    by_source = {"physics": {"aggregate": "mean", "k": 5}}
    phys = search_config_for(nsprm, "physics", search, by_source)
    gsm = search_config_for(nsprm, "gsm8k", search, by_source)
    assert (phys.aggregate, phys.k, phys.beam_width) == ("mean", 5, 2)  # the source's options
    assert (gsm.aggregate, gsm.k, gsm.method) == ("min", 8, "nsprm")  # another source: the search group's
    g = search_config_for(greedy, "physics", search, by_source)
    assert (g.aggregate, g.k, g.beam_width, g.method) == ("mean", 3, 1, "greedy")  # the method's options win
    check_search_configs([nsprm, greedy, direct], search, by_source)
    with pytest.raises(ValueError, match=r"method 'nsprm' on source 'physics' \(search_source_overrides.physics.*"
                                         r"unknown search option\(s\) \['agregate'\]"):
        check_search_configs([nsprm], search, {"physics": {"agregate": "mean"}})
    with pytest.raises(ValueError, match="aggregate must be one of"):
        search_config_for(nsprm, "physics", search, {"physics": {"aggregate": "median"}})


def test_evaluate_checks_source_search_options_before_starting_ray(tmp_path):
    import ray

    from pcr_ray.evaluate import compose_config, evaluate

    started = ray.is_initialized()
    with pytest.raises(ValueError, match=r"search_source_overrides\.physics: unknown key 'beam'"):
        evaluate(compose_config(["experiment=smoke", "+search_source_overrides.physics.beam=3"]), run_dir=tmp_path)
    assert ray.is_initialized() == started


def test_the_printed_tables_name_a_gold_givens_run_oracle():
    from pcr_ray.pipeline.metrics import error_table

    rows = [_row("p1", "nsprm", False, True, "short", error_type="unit"),
            _row("p1", "greedy", True, True, "short")]
    for givens, oracle in (("extract", False), ("gold", True), (None, False)):
        m = compute_metrics(rows, ["nsprm", "greedy"], {} if givens is None else {"givens": givens})
        assert m.get("givens") == givens
        for table in (markdown_table(m), error_table(m)):
            assert ("| nsprm (oracle givens) |" in table) == oracle
            assert ("| nsprm |" in table) == (not oracle)
