"""report.html: self-contained, escapes what models write, and its table carries the metrics (no browser here)."""

from __future__ import annotations

import json
import re

from pcr_ray.pipeline.metrics import compute_metrics
from pcr_ray.pipeline.report import render_report
from tests.pipeline_util import MetricsTableParser

TRACE = {"givens": [{"name": "a", "value": 3, "unit": "m"}, {"name": "b", "value": 4, "unit": "m"}],
         "steps": [{"op": "add", "args": {"x": "a", "y": "b"}, "out": {"name": "c", "unit": "m"}}],
         "answer": [{"name": "c", "unit": "m"}]}


def _rows() -> list[dict]:
    base = {"source": "physics", "horizon": "short", "gold_answer": "7 m", "question": "a <script>alert(1)</script> b",
            "trace_json": json.dumps(TRACE), "step_verdicts": '["ok"]', "step_scores": "[0.875]", "candidates": 5,
            "prm_calls": 1}
    return [{**base, "problem_id": "p1", "method": "nsprm", "correct": True, "answered": True, "answer": "7 m"},
            {**base, "problem_id": "p1", "method": "greedy", "correct": False, "answered": True, "answer": "1 m",
             "silent_failure": True, "error_type": "formula_misuse", "error_detail": "step 0: sub where gold uses add"},
            {**base, "problem_id": "p2", "method": "nsprm", "correct": False, "answered": False,
             "error_type": "no_answer", "stop_reason": "dead_end", "horizon": "long"},
            {**base, "problem_id": "p2", "method": "greedy", "correct": True, "answered": True, "horizon": "long"}]


def test_report_is_self_contained_escaped_and_its_table_matches_the_metrics():
    rows = _rows()
    metrics = compute_metrics(rows, ["nsprm", "greedy"])
    page = render_report(metrics, rows, config_yaml="search:\n  beam_width: 4\n")
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    p = MetricsTableParser()
    p.feed(page)
    assert all(s.startswith("data:image/png;base64,") for s in p.srcs) and len(p.srcs) == 3
    table = {r[0][2]: {c: (v, t) for c, v, t in r} for r in p.rows if r}
    assert set(table) == {"nsprm", "greedy"}
    for m in ("nsprm", "greedy"):
        assert float(table[m]["Acc@1 %"][0]) == metrics["methods"][m]["acc"] == 0.5
        assert table[m]["Acc@1 %"][1] == "50.0"
    assert table["greedy"]["silent %"][1] == "50.0" and table["nsprm"]["silent %"][1] == "0.0"
    assert len(re.findall(r'<details class="problem"', page)) == 2
    assert "0.875" in page and "formula_misuse" in page and "dead_end" in page


def test_report_caps_the_trace_view():
    rows = [{**r, "problem_id": f"{r['problem_id']}-{i}"} for i in range(3) for r in _rows()]
    page = render_report(compute_metrics(rows), rows, max_problems=2)
    assert len(re.findall(r'<details class="problem"', page)) == 2
    assert "4 more problems are in results.parquet" in page


def test_the_trace_view_filters_by_error_type_by_method_and_by_disagreement():
    rows = _rows()
    rows[1] = {**rows[1], "grade_reason": "value 1 vs gold 7 (rel. error 0.857)"}
    page = render_report(compute_metrics(rows, ["nsprm", "greedy"]), rows)
    p1 = re.search(r'<details class="problem" data-problem="p1"[^>]*>', page).group(0)
    p2 = re.search(r'<details class="problem" data-problem="p2"[^>]*>', page).group(0)
    assert 'data-errors="formula_misuse"' in p1 and 'data-wrong="greedy"' in p1 and 'data-disagree="1"' in p1
    assert 'data-errors="no_answer"' in p2 and 'data-wrong="nsprm"' in p2
    # the filter bar offers the error types that occur and every method; a method's name leads to its wrong answers
    assert '<option value="formula_misuse">' in page and '<option value="no_answer">' in page
    assert '<select id="f-wrong"' in page and 'href="#wrong=greedy"' in page
    assert 'graded: <span class="meta">value 1 vs gold 7 (rel. error 0.857)</span>' in page  # why, per method


def test_a_run_on_gold_givens_is_named_oracle_in_the_banner_and_the_tables():
    rows = _rows()
    page = {g: render_report(compute_metrics(rows, ["nsprm", "greedy"], {"givens": g}), rows)
            for g in ("extract", "gold")}
    assert 'id="oracle-givens"' in page["gold"] and 'id="oracle-givens"' not in page["extract"]
    assert "oracle givens" not in page["extract"].lower()
    for g, labels in (("extract", {"nsprm", "greedy"}), ("gold", {"nsprm (oracle givens)", "greedy (oracle givens)"})):
        p = MetricsTableParser()
        p.feed(page[g])
        assert {r[0][2] for r in p.rows if r} == labels
    assert '<a href="#wrong=nsprm">nsprm (oracle givens)</a>' in page["gold"]  # the link keeps the method's name
    assert re.search(r'id="error-types".*<td>greedy \(oracle givens\)</td>', page["gold"], re.S)


def test_the_report_shows_unseen_and_seen_templates_as_rows_only_when_rows_carry_the_split():
    rows = _rows()
    assert 'id="template-split"' not in render_report(compute_metrics(rows), rows)
    rows = [{**r, "template_split": "heldout" if r["problem_id"] == "p1" else "train"} for r in rows]
    page = render_report(compute_metrics(rows, ["nsprm", "greedy"]), rows)
    table = re.search(r'<table id="template-split">(.*?)</table>', page).group(1)
    cells = [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", table)[1:]]
    right, wrong = ["1", "100.0", "21-100"], ["1", "0.0", "0-79"]  # one problem each: Wilson's interval
    assert cells == [["nsprm", "unseen templates", *right], ["nsprm", "seen templates", *wrong],
                     ["greedy", "unseen templates", *wrong], ["greedy", "seen templates", *right]]
