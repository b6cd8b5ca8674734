"""Assumption errors: physics problems that state a condition, the classifier that finds a trace leaving it out,
and the reproduction row that reads it."""

from __future__ import annotations

import copy
import hashlib
import json
import math

import pytest

from pcr_ray.core.verifier import verify
from pcr_ray.data.physics import MIXES, TEMPLATES, generate_problems, make_problem, mix_templates
from pcr_ray.pipeline.metrics import ERROR_TYPES, classify_error, compute_metrics, ignored_conditions

CONDITION_TEMPLATES = [t for t in TEMPLATES if t.assumptions]

# sha256 of generate_problems(n, seed) (Problem.to_dict() rows, sort_keys JSON) as the generator wrote them before
# the assumption templates existed; the marked templates' gold traces now carry a `meta` key, left out here.
CORE_DIGESTS = {
    (0, 200): "eafce00a1e0d20b69e1e3772ab333801c2f782e3da3536afa032bd22e82519a9",
    (4242, 300): "87a2fb8dcb5839adaf136688823f713fcc22173125a781507da126d680de838f",
    (3, 400): "c6a4321d4b4b61025ffc76e357ded46d5dbb5d36937ef5ccdf597ca7765e118e",
}


def _digest(problems) -> str:
    rows = []
    for p in problems:
        d = p.to_dict()
        t = json.loads(d["gold_trace"])
        t.pop("meta", None)
        d["gold_trace"] = json.dumps(t, separators=(",", ":"))
        rows.append(d)
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("seed,n", sorted(CORE_DIGESTS))
def test_the_core_mix_keeps_every_seeds_problems(seed, n):
    assert _digest(generate_problems(n, seed=seed)) == CORE_DIGESTS[(seed, n)]
    assert _digest(generate_problems(n, seed=seed, mix="core")) == CORE_DIGESTS[(seed, n)]


def test_mixes_select_their_templates():
    core, cond, every = (set(t.name for t in mix_templates(m)) for m in MIXES)
    new = {t.name for t in TEMPLATES if not t.core}
    assert new and not new & core and every == core | new
    assert cond == {t.name for t in CONDITION_TEMPLATES} and new <= cond and cond & core  # marked core ones too
    probs = generate_problems(60, seed=5, mix="assumption")
    assert {p.id.rsplit("/", 1)[1] for p in probs} == cond
    assert all(p.gold_trace["meta"]["assumptions"] for p in probs)
    assert generate_problems(30, seed=5, mix="assumption")[0].to_dict() == probs[0].to_dict()
    assert not any("assumptions" in p.gold_trace["meta"] for p in generate_problems(120, seed=5)
                   if p.id.rsplit("/", 1)[1] not in cond)
    with pytest.raises(ValueError, match="unknown physics mix"):
        generate_problems(3, mix="nope")
    with pytest.raises(ValueError, match="mix='all'"):
        generate_problems(3, templates=["drag_fall_speed"])
    assert len(generate_problems(3, templates=["drag_fall_speed"], mix="all")) == 3


@pytest.mark.parametrize("tpl", CONDITION_TEMPLATES, ids=lambda t: t.name)
def test_condition_templates_answer_needs_the_condition(tpl):
    """(Every template's gold trace verifies: tests/test_data_physics.py.)"""
    for seed in range(6):
        p = make_problem(tpl, seed, 0)
        conds = p.gold_trace["meta"]["assumptions"]
        assert conds == {k: list(g) for k, g in tpl.assumptions.items()}
        names = {g["name"] for g in p.gold_trace["givens"]}
        assert all(set(g) <= names for g in conds.values())
        assert ignored_conditions(p.gold_trace, p.gold_trace) == []  # the gold answer depends on every condition
        if not tpl.core:
            assert 3 <= p.gold_steps <= 4 and not any(g["desc"].startswith("not needed")
                                                      for g in p.gold_trace["givens"])


# ---------------------------------------------------------------- the classifier on verified traces


def _friction_problem():
    p = make_problem("friction_accel", 0, 0)
    assert p.gold_trace["meta"]["assumptions"] == {"friction": ["mu"]}
    return p


def _row(p, trace):
    v = verify(trace)
    assert v.ok, v.format_text()
    value = v.answer[0].value
    return {"correct": False, "answered": True, "trace_json": json.dumps(trace), "answer_value": value,
            "gold_value": p.answer_value, "stop_reason": "answer"}


def _without_friction(p):
    """The crate's acceleration as F/m: a verified trace that never uses mu."""
    t = copy.deepcopy(p.gold_trace)
    t.pop("meta")
    t["steps"] = [{"op": "newton_accel", "args": {"f": "F_app", "m": "m"}, "out": {"name": "a", "unit": "m/s^2"}}]
    return t


def test_a_trace_that_leaves_out_friction_is_an_assumption_error():
    p = _friction_problem()
    t = _without_friction(p)
    assert not math.isclose(verify(t).answer[0].value, p.answer_value, rel_tol=1e-3)
    kind, detail = classify_error(_row(p, t), json.dumps(p.gold_trace))
    assert kind == "assumption" and "friction (mu)" in detail
    # computing the friction force and then not using it is still leaving the condition out
    t2 = copy.deepcopy(p.gold_trace)
    t2["steps"] = t2["steps"][:3] + [{"op": "newton_accel", "args": {"f": "F_app", "m": "m"},
                                      "out": {"name": "a", "unit": "m/s^2"}}]
    assert "mu" in json.dumps(t2["steps"])
    assert classify_error(_row(p, t2), p.gold_trace)[0] == "assumption"


def test_a_wrong_trace_that_uses_the_condition_is_not_an_assumption_error():
    p = _friction_problem()
    t = copy.deepcopy(p.gold_trace)  # friction force used, but added to the push instead of subtracted
    assert [s["op"] for s in t["steps"]] == ["const", "weight", "friction_force", "sub", "newton_accel"]
    t["steps"][3] = {"op": "add", "args": {"x": "F_app", "y": "f_k"}, "out": {"name": "F_net", "unit": "N"}}
    kind, _ = classify_error(_row(p, t), p.gold_trace)
    assert kind == "formula_misuse"
    # a literal equal to the condition's value counts as using it
    lit = copy.deepcopy(p.gold_trace)
    mu = next(g["value"] for g in lit["givens"] if g["name"] == "mu")
    lit["steps"][2] = {"op": "friction_force", "args": {"mu": mu, "n": "W"}, "out": {"name": "f_k", "unit": "N"}}
    lit["steps"][3] = {"op": "add", "args": {"x": "F_app", "y": "f_k"}, "out": {"name": "F_net", "unit": "N"}}
    assert ignored_conditions(lit, p.gold_trace) == []
    assert classify_error(_row(p, lit), p.gold_trace)[0] != "assumption"
    # the gold trace itself answers right; a problem without conditions never gets the type
    assert classify_error({**_row(p, p.gold_trace), "correct": True}, p.gold_trace) == ("", "")
    plain = make_problem("newton_force", 0, 0)
    assert "assumptions" not in plain.gold_trace["meta"]
    wrong = copy.deepcopy(plain.gold_trace)
    wrong["steps"] = [{"op": "mul", "args": {"x": "a", "y": "a"}, "out": {"name": "a2", "unit": "m^2/s^4"}}]
    wrong["answer"] = [{"name": "a2", "unit": "m^2/s^4"}]
    assert ignored_conditions(wrong, plain.gold_trace) == []


def test_unit_errors_come_before_assumption_errors():
    p = _friction_problem()
    t = _without_friction(p)
    row = _row(p, t)
    row["answer_value"] = p.answer_value * 1000  # an answer off by a unit factor is a unit error first
    assert classify_error(row, p.gold_trace)[0] == "unit"
    bad = copy.deepcopy(t)
    bad["steps"][0]["out"]["unit"] = "m/s"  # the verifier rejects the declared unit
    row = {**_row(p, t), "trace_json": json.dumps(bad)}
    assert classify_error(row, p.gold_trace)[0] == "unit"


def test_real_search_traces_that_never_name_the_condition_are_assumption_errors():
    from pcr_ray.generators.enumerate import EnumeratorGenerator
    from pcr_ray.search import SearchConfig, SearchProblem, run_search

    probs = generate_problems(22, seed=0, mix="assumption")
    res = run_search([SearchProblem.from_problem(p, givens="gold") for p in probs], EnumeratorGenerator(cap=24),
                     None, SearchConfig(method="verifier_only", max_steps=5))
    seen = {"assumption": 0, "other": 0}
    for p, r in zip(probs, res, strict=True):
        if r.answer_value is None or math.isclose(r.answer_value, p.answer_value, rel_tol=1e-4):
            continue
        trace = json.loads(r.trace) if isinstance(r.trace, str) else r.trace
        assert verify(trace).ok
        row = {"correct": False, "answered": True, "trace_json": json.dumps(trace), "answer_value": r.answer_value,
               "gold_value": p.answer_value, "stop_reason": r.stop_reason}
        kind, _ = classify_error(row, p.gold_trace)
        carriers = {g for gs in p.gold_trace["meta"]["assumptions"].values() for g in gs}
        named = any(a in carriers for s in trace["steps"] for a in s["args"].values() if isinstance(a, str))
        if not named:  # gold givens: a trace that never names the condition's given cannot have used it
            assert kind == "assumption", (p.text, trace)
        seen["assumption" if kind == "assumption" else "other"] += 1
    assert seen["assumption"] >= 1, seen


def test_the_pipeline_row_carries_the_condition_to_the_classifier():
    from pcr_ray.pipeline.records import base_record, grade_row

    p = _friction_problem()
    item = {**p.to_dict(), "method": "prm_only"}  # a work item: Problem.to_dict() plus the method label
    rec = {**base_record(item), "answered": True, "stop_reason": "answer", "error": "",
           "trace_json": json.dumps(_without_friction(p)), "answer_value": verify(_without_friction(p)).answer[0].value,
           "answer_unit": p.answer_unit}
    graded = grade_row(rec)
    assert graded["correct"] is False and graded["error_type"] == "assumption", graded["error_detail"]
    assert "assumption" in ERROR_TYPES
    m = compute_metrics([graded])
    assert m["methods"]["prm_only"]["error_types"]["assumption"] == 1


# ---------------------------------------------------------------- the reproduction row


def _args(tmp_path, *overrides):
    from pcr_ray.configs import compose
    from pcr_ray.pipeline import reproduce

    return reproduce.options(compose("reproduce", [f"out={tmp_path}", *overrides]))


def test_the_conditions_step_evaluates_condition_problems(tmp_path):
    from pcr_ray.evaluate import compose_config, load_problems
    from pcr_ray.pipeline import reproduce

    step = next(s for s in reproduce.recipe(_args(tmp_path)) if s.name == "conditions")
    argv = list(step.argv)
    cfg = compose_config(argv[argv.index("evaluate") + 1:])
    assert list(cfg.methods) == ["nsprm", "prm_only"]
    assert cfg.generator.cap == 48 and cfg.search.beam_width == 2 and cfg.search.max_steps == 5  # twice Table 1
    probs = load_problems(cfg.dataset)
    assert len(probs) == reproduce.SCALES["cpu"].conditions
    assert all(p.gold_trace["meta"]["assumptions"] for p in probs)
    assert step.done_when == tmp_path.resolve() / "conditions" / "metrics.json"


def test_the_assumption_row_reads_the_conditions_results(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pcr_ray.pipeline import reproduce

    p = _friction_problem()
    out = json.dumps(_without_friction(p))
    bad = _without_friction(p)
    bad["steps"][0]["out"]["unit"] = "m/s"  # rejected by the verifier (a unit error first) and leaves mu out
    used = copy.deepcopy(p.gold_trace)
    used["steps"][3] = {"op": "add", "args": {"x": "F_app", "y": "f_k"}, "out": {"name": "F_net", "unit": "N"}}
    gold, bad, used = json.dumps(p.gold_trace), json.dumps(bad), json.dumps(used)
    rows = [  # prm_only: 3 assumption errors, NS-PRM avoids 2 (right on a, uses mu on b); d leaves mu out too
        ("a", "prm_only", False, "assumption", out), ("a", "nsprm", True, "", gold),
        ("b", "prm_only", False, "assumption", out), ("b", "nsprm", False, "formula_misuse", used),
        ("c", "prm_only", False, "assumption", out), ("c", "nsprm", False, "assumption", out),
        ("d", "prm_only", False, "unit", bad), ("d", "nsprm", False, "assumption", out),
        ("e", "prm_only", False, "no_answer", ""), ("e", "nsprm", False, "no_answer", ""),
    ]
    (tmp_path / "conditions").mkdir()
    keys = ("problem_id", "method", "correct", "error_type", "trace_json")
    pq.write_table(pa.Table.from_pylist([{**dict(zip(keys, r, strict=True)), "gold_trace_json": gold} for r in rows]),
                   tmp_path / "conditions" / "results.parquet")
    claims = {r["label"]: r for r in reproduce.error_type_claims(tmp_path)}
    row = claims["error type NS-PRM removes vs PRM-only: assumption"]
    assert (row["k"], row["n"], row["ours"], row["paper"], row["step"]) == (2, 3, 66.7, "41.0", "conditions")
    anytype = claims["condition left out (any error type): NS-PRM removes vs PRM-only"]
    assert (anytype["k"], anytype["n"]) == (2, 4)
    share = {label: (r["k"], r["n"]) for label, r in claims.items() if "condition problems" in label}
    assert share == {"PRM-only's wrong answers, condition problems: assumption errors": (3, 5),
                     "PRM-only's wrong answers, condition problems: condition left out": (4, 5),
                     "NS-PRM's wrong answers, condition problems: assumption errors": (2, 4),
                     "NS-PRM's wrong answers, condition problems: condition left out": (2, 4)}
    # the unit and formula rows still come from the table step (not run here)
    assert [r["how"] for r in claims.values() if r["step"] == "table"] == ["step not run", "step not run"]
    missing = reproduce.error_type_claims(tmp_path / "nothing")
    assert [r["how"] for r in missing if r["step"] == "conditions"] == ["step not run"]
