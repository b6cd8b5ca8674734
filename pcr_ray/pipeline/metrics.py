"""Metrics of an evaluation: Acc@1, silent failures by horizon, error types against gold traces, call counts.

Pure Python (no Ray): `classify_error` labels one wrong row by comparing its trace with the gold trace;
`compute_metrics` aggregates rows (dicts with the results schema) into the metrics.json structure.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pcr_ray.core.verifier import verify
from pcr_ray.pipeline.stats import paired_comparisons, wilson

LONG_HORIZON = 5  # gold traces of this many steps or more are "long"

ERROR_TYPES = ("unit", "formula_misuse", "assumption", "wrong_variable", "arithmetic", "parse", "no_answer",
               "unattributed", "pipeline_error")

_UNIT_CODES = {"unit_mismatch", "not_dimensionless", "wrong_out_unit", "answer_unit_mismatch", "bad_unit"}
_ARITH_CODES = {"arithmetic_error", "domain_error", "non_finite"}
_PARSE_CODES = {"malformed", "bad_name", "unknown_op", "missing_arg", "extra_arg", "bad_arg"}
_VARIABLE_CODES = {"undefined_var", "redefined_var", "answer_undefined"}

# Ratios between a wrong and a right answer that betray a unit slip (k, M, milli, minutes, hours, km/h, %).
_UNIT_FACTORS = sorted({10.0 ** k for k in range(-9, 10) if k} | {60.0, 3600.0, 1 / 60, 1 / 3600, 3.6, 1 / 3.6,
                                                               24.0, 1 / 24, 1440.0, 1 / 1440})


def horizon_of(gold_steps: int | None) -> str:
    """'long' (5+ gold steps), 'short', or 'unknown' (no gold trace)."""
    if gold_steps is None or (isinstance(gold_steps, float) and math.isnan(gold_steps)):
        return "unknown"
    return "long" if int(gold_steps) >= LONG_HORIZON else "short"


# A generated-physics row's template split (the gold trace's meta.template_split) as the tables name it.
TEMPLATE_SPLIT_LABELS = {"heldout": "unseen templates", "train": "seen templates"}


def template_split_of(gold_trace: Any) -> str:
    """The gold trace's meta.template_split (generated physics: 'heldout' or 'train'), '' when it records none."""
    trace = _load(gold_trace)
    meta = trace.get("meta") if trace else None
    return str(meta.get("template_split") or "") if isinstance(meta, dict) else ""


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-12


def is_unit_slip(value: float | None, gold: float | None) -> bool:
    """The answer equals the gold one times a common unit factor (1000, 60, 3600, 3.6, 100, ...)."""
    if value is None or gold is None or gold == 0 or value == 0:
        return False
    if not (math.isfinite(value) and math.isfinite(gold)):
        return False
    r = value / gold
    return any(_close(r, f, 1e-4) for f in _UNIT_FACTORS)


def _load(trace: Any) -> dict | None:
    if trace is None or trace == "":
        return None
    if isinstance(trace, (str, bytes)):
        try:
            trace = json.loads(trace)
        except ValueError:
            return None
    return trace if isinstance(trace, dict) else None


def _steps_with_values(trace: dict) -> tuple[list[tuple[str, dict, float]], list[float], Any]:
    """[(op, args, base value)] of the steps the verifier accepts, the givens' base values, and the verdict."""
    verdict = verify(trace)
    steps = [(s.op, dict(s.step.args) if s.step else {}, s.base) for s in verdict.steps]
    givens = [g.base for g in verdict.givens]
    return steps, givens, verdict


def compare_with_gold(pred: dict, gold: dict) -> tuple[str, str]:
    """(error type, detail) of a verified but wrong trace, from its first step that leaves the gold trace.

    Variables are matched by value (names differ between traces): a predicted step whose value is a gold
    step's value is on track. At the first step that is not, the next gold step not yet reproduced is
    the one it should have been: a different op is formula misuse, the same op on other quantities is a
    wrong variable. When every step is on track, the answer names the wrong quantity (wrong variable).
    """
    psteps, _, _ = _steps_with_values(pred)
    gsteps, ggivens, _ = _steps_with_values(gold)
    gold_vals = [v for _, _, v in gsteps]
    reached: set[int] = set()
    for i, (op, _args, v) in enumerate(psteps):
        hit = next((j for j, gv in enumerate(gold_vals) if _close(v, gv)), None)
        if hit is not None:
            reached.add(hit)
            continue
        if any(_close(v, g) for g in ggivens):
            continue  # re-derived a given: harmless
        frontier = next((j for j in range(len(gsteps)) if j not in reached), None)
        if frontier is None:
            return "wrong_variable", f"step {i}: {op} goes past the gold trace"
        gop, _gargs, _ = gsteps[frontier]
        if op != gop:
            return "formula_misuse", f"step {i}: {op} where the gold trace uses {gop}"
        return "wrong_variable", f"step {i}: {op} on other quantities than the gold step {frontier}"
    return "wrong_variable", "every step is on the gold path but the answer names another quantity"


def _answer_inputs(trace: dict) -> tuple[set[str], list[float]]:
    """The variable names the answer depends on (through the steps, transitively) and the numeric literals
    of the steps it depends on."""
    steps = trace.get("steps") if isinstance(trace.get("steps"), list) else []
    answer = trace.get("answer") if isinstance(trace.get("answer"), list) else []
    by_out = {s["out"].get("name"): s for s in steps if isinstance(s, dict) and isinstance(s.get("out"), dict)}
    todo = [a.get("name") for a in answer if isinstance(a, dict)]
    seen: set[str] = set()
    literals: list[float] = []
    while todo:
        name = todo.pop()
        if not isinstance(name, str) or name in seen:
            continue
        seen.add(name)
        step = by_out.get(name)
        if step is None:
            continue
        args = step.get("args")
        for v in (args.values() if isinstance(args, dict) else ()):
            if isinstance(v, str):
                todo.append(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                literals.append(float(v))
    return seen, literals


def ignored_conditions(pred: dict, gold: dict) -> list[str]:
    """The conditions of the gold trace's meta.assumptions (condition -> names of the givens that carry it) whose
    givens the predicted trace's answer never depends on, in the gold trace's order.

    Givens are matched by value and dimension (the predicted trace names its givens itself): a condition is used
    when a given the answer depends on has the value of one of its gold givens, or a numeric literal of a step
    the answer depends on equals that value. [] when the gold trace states no condition.
    """
    conds = (gold.get("meta") or {}).get("assumptions") if isinstance(gold.get("meta"), dict) else None
    if not conds:
        return []

    gvars = {g.name: g for g in verify(gold).givens}
    pvars = {g.name: g for g in verify(pred).givens}
    used, literals = _answer_inputs(pred)
    used_vars = [pvars[n] for n in used if n in pvars]
    out = []
    for cond, names in conds.items():
        carriers = [gvars[n] for n in names if n in gvars]
        hit = any(_close(v.base, c.base) and v.dims == c.dims for v in used_vars for c in carriers) or any(
            _close(x, c.base) or _close(x, c.value) for x in literals for c in carriers)
        if carriers and not hit:
            out.append(str(cond))
    return out


def classify_error(row: Mapping[str, Any], gold_trace: Any = None) -> tuple[str, str]:
    """(error type, detail) of a row that is not correct; ('', '') for a correct row.

    Order: pipeline error; no answer (or parse failure); a final trace the verifier rejects (by its
    diagnostic code); a unit slip in the answer value; a condition the problem states (the gold trace's
    meta.assumptions) that the trace's answer never uses (assumption); comparison with the gold trace; else
    unattributed. Unit errors come before assumption errors: a trace the verifier rejects for units, or an answer
    off by a unit factor, is a unit error whatever else it misses. Assumption errors come before formula misuse
    and wrong variable: a trace that drops a stated condition leaves the gold path at a different formula (free
    fall for a fall with drag) or other quantities, and the dropped condition is the cause of that divergence.
    """
    if row.get("correct"):
        return "", ""
    if row.get("error"):
        return "pipeline_error", str(row["error"])[:200]
    stop = str(row.get("stop_reason") or "")
    if not row.get("answered"):
        if "parse" in stop:
            return "parse", stop
        return "no_answer", stop or "no answer returned"
    pred = _load(row.get("trace_json"))
    gold = _load(gold_trace)
    if pred is not None:
        verdict = verify(pred)
        if not verdict.ok and verdict.first_failure is not None:
            d = verdict.first_failure
            code = d.code
            kind = ("unit" if code in _UNIT_CODES else "arithmetic" if code in _ARITH_CODES
                    else "wrong_variable" if code in _VARIABLE_CODES else "parse" if code in _PARSE_CODES
                    else "no_answer" if code == "no_answer" else "unattributed")
            return kind, d.feedback()[:200]
    if is_unit_slip(row.get("answer_value"), row.get("gold_value")):
        return "unit", f"answer {row.get('answer_value')} is the gold {row.get('gold_value')} times a unit factor"
    if pred is not None and gold is not None:
        try:
            missed = ignored_conditions(pred, gold)
        except Exception as exc:  # a comparison bug must not lose the row
            return "unattributed", f"condition check failed: {type(exc).__name__}: {exc}"[:200]
        if missed:
            names = {c: list((gold.get("meta") or {}).get("assumptions", {}).get(c, ())) for c in missed}
            return "assumption", ("the trace never uses the stated " + "; ".join(
                f"{c} ({', '.join(map(str, n))})" for c, n in names.items()))[:200]
    if pred is not None and gold is not None and pred.get("steps"):
        try:
            return compare_with_gold(pred, gold)
        except Exception as exc:  # a comparison bug must not lose the row
            return "unattributed", f"comparison failed: {type(exc).__name__}: {exc}"[:200]
    if pred is None and row.get("stop_reason") and "parse" in stop:
        return "parse", stop
    return "unattributed", "wrong answer; no gold trace to compare with" if gold is None else "wrong answer"


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def _mean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else None


def method_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Metrics of one method's rows."""
    n = len(rows)
    correct = sum(bool(r.get("correct")) for r in rows)
    answered = sum(bool(r.get("answered")) for r in rows)
    silent = sum(bool(r.get("silent_failure")) for r in rows)
    lo, hi = wilson(correct, n)
    out: dict[str, Any] = {
        "n": n, "correct": correct, "acc": _rate(correct, n), "acc_ci95": [lo, hi],
        "answered": answered, "answer_rate": _rate(answered, n),
        "silent_failures": silent, "silent_failure_rate": _rate(silent, n),
        "pipeline_errors": sum(bool(r.get("error")) for r in rows),
        "extract_failed": sum(bool(r.get("extract_failed")) for r in rows),
    }
    by_h: dict[str, Any] = {}
    for h in ("short", "long", "unknown"):
        hr = [r for r in rows if r.get("horizon") == h]
        k = sum(bool(r.get("correct")) for r in hr)
        s = sum(bool(r.get("silent_failure")) for r in hr)
        by_h[h] = {"n": len(hr), "acc": _rate(k, len(hr)), "silent_failures": s,
                   "silent_failure_rate": _rate(s, len(hr))}
    out["by_horizon"] = by_h
    out["silent_failure_rate_long"] = by_h["long"]["silent_failure_rate"]
    out["silent_failure_rate_short"] = by_h["short"]["silent_failure_rate"]
    types = Counter(r.get("error_type") or "unattributed" for r in rows if not r.get("correct"))
    out["error_types"] = {t: types.get(t, 0) for t in ERROR_TYPES} | {t: c for t, c in types.items()
                                                                     if t not in ERROR_TYPES}
    by_src: dict[str, Any] = {}
    for src in sorted({str(r.get("source")) for r in rows}):
        sr = [r for r in rows if str(r.get("source")) == src]
        by_src[src] = {"n": len(sr), "acc": _rate(sum(bool(r.get("correct")) for r in sr), len(sr))}
    out["by_source"] = by_src
    by_split: dict[str, Any] = {}  # generated physics by template split, when the rows carry it
    for split in TEMPLATE_SPLIT_LABELS:
        sr = [r for r in rows if r.get("template_split") == split]
        if sr:
            k = sum(bool(r.get("correct")) for r in sr)
            by_split[split] = {"n": len(sr), "correct": k, "acc": _rate(k, len(sr)),
                               "acc_ci95": list(wilson(k, len(sr)))}
    out["by_template_split"] = by_split
    for key in ("candidates", "prm_calls", "generator_calls", "verifier_rejections", "n_steps", "time_s",
                "prompt_tokens", "output_tokens", "prm_tokens"):
        vals = [r.get(key) for r in rows]
        out[f"mean_{key}"] = _mean(vals)
        out[f"total_{key}"] = sum(v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v)))
    return out


def compute_metrics(rows: Iterable[Mapping[str, Any]], methods: Sequence[str] | None = None,
                    extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """metrics.json: {'methods': {method: metrics}, 'n_problems', 'n_rows', ...extra}; methods in the given order."""
    rows = list(rows)
    seen = list(dict.fromkeys(str(r.get("method")) for r in rows))
    order = [m for m in (methods or []) if m in seen] + [m for m in seen if m not in (methods or [])]
    result: dict[str, Any] = {
        "n_problems": len({r.get("problem_id") for r in rows}),
        "n_rows": len(rows),
        "horizon_threshold": LONG_HORIZON,
        "methods": {m: method_metrics([r for r in rows if str(r.get("method")) == m]) for m in order},
        "paired": paired_comparisons(rows, order),  # every pair of methods on the problems both ran
        "extraction": extraction_summary(rows),
    }
    if extra:
        result.update(extra)
    return result


def extraction_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per problem (once, whatever the methods): how many the extractor read, and of them how many lacked each
    thing it must find (rows' extract_failed: no givens, no asked quantity); none under oracle givens."""
    by_problem = {r.get("problem_id"): str(r.get("extract_failed") or "") for r in rows
                  if r.get("givens_source") not in ("gold", None, "")}
    failed = Counter(why for text in by_problem.values() for why in text.split("; ") if why)
    return {"problems": len(by_problem), "failed": sum(bool(t) for t in by_problem.values()), "by_reason": dict(failed)}


def extraction_note(metrics: Mapping[str, Any]) -> str:
    """'incomplete for K of N problems (no givens in a, ...)', or '' when extraction found every kind in each."""
    ex = metrics.get("extraction") or {}
    if not ex.get("failed"):
        return ""
    reasons = ", ".join(f"{why} in {n}" for why, n in sorted(ex["by_reason"].items()))
    return f"incomplete for {ex['failed']} of {ex['problems']} problems ({reasons})"


def givens_line(metrics: Mapping[str, Any]) -> str:
    """'givens: <mode>' for the CLI summaries, with the problems whose extraction found nothing of a kind."""
    note = extraction_note(metrics)
    return (f"givens: {GIVENS_NOTES.get(str(metrics.get('givens')), metrics.get('givens', '-'))}"
            + (f"; extraction {note}" if note else ""))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


ORACLE_GIVENS = "oracle givens"  # how every table and report names a run on the gold trace's givens
# how each givens mode (metrics.json `givens`) is described in the CLI summary and the report
GIVENS_NOTES = {"extract": "extract (the givens and the asked unit read from the problem text)",
                "gold": "gold: ORACLE GIVENS (the gold trace's givens and answer unit, picked with the answer key: an "
                        "ablation, not what a run on your own data gets)"}


def oracle_givens(metrics: Mapping[str, Any]) -> bool:
    """Whether a run's metrics were measured on the gold trace's givens (metrics.json `givens: gold`)."""
    return metrics.get("givens") == "gold"


def method_label(method: str, metrics: Mapping[str, Any]) -> str:
    """A method's name as the tables show it: with "(oracle givens)" when the run used the gold trace's givens."""
    return f"{method} ({ORACLE_GIVENS})" if oracle_givens(metrics) else method


TABLE_COLUMNS = ("method", "n", "Acc@1 %", "95% CI", "answered %", "silent %", "silent long %", "silent short %",
                 "top error", "cand/problem", "PRM calls/problem", "s/problem")


def table_rows(metrics: Mapping[str, Any]) -> list[list[str]]:
    """The metrics table as strings, one row per method, columns TABLE_COLUMNS (report, README, CLI); a run on
    gold givens names its methods "(oracle givens)"."""
    rows = []
    for m, d in metrics["methods"].items():
        errs = {k: v for k, v in d["error_types"].items() if v}
        top = max(errs.items(), key=lambda kv: kv[1]) if errs else None
        lo, hi = d["acc_ci95"]
        rows.append([
            method_label(m, metrics), str(d["n"]), _pct(d["acc"]), f"{100 * lo:.0f}-{100 * hi:.0f}",
            _pct(d["answer_rate"]),
            _pct(d["silent_failure_rate"]), _pct(d["silent_failure_rate_long"]), _pct(d["silent_failure_rate_short"]),
            f"{top[0]} ({top[1]})" if top else "-", _num(d["mean_candidates"]), _num(d["mean_prm_calls"]),
            _num(d["mean_time_s"], 2),
        ])
    return rows


TEMPLATE_SPLIT_COLUMNS = ("method", "templates", "n", "Acc@1 %", "95% CI")


def template_split_rows(metrics: Mapping[str, Any]) -> list[list[str]]:
    """Generated physics' accuracy on unseen (held-out) and seen (training) templates, one row per method and
    split the rows carry, columns TEMPLATE_SPLIT_COLUMNS; [] when no row carries a template split."""
    rows = []
    for m, d in metrics["methods"].items():
        for split, label in TEMPLATE_SPLIT_LABELS.items():
            s = (d.get("by_template_split") or {}).get(split)
            if s:
                lo, hi = s["acc_ci95"]
                rows.append([m, label, str(s["n"]), _pct(s["acc"]), f"{100 * lo:.0f}-{100 * hi:.0f}"])
    return rows


def template_split_table(metrics: Mapping[str, Any]) -> str:
    """template_split_rows in markdown; '' when no row carries a template split."""
    rows = template_split_rows(metrics)
    if not rows:
        return ""
    lines = ["| " + " | ".join(TEMPLATE_SPLIT_COLUMNS) + " |", "|" + "---|" * len(TEMPLATE_SPLIT_COLUMNS)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def markdown_table(metrics: Mapping[str, Any]) -> str:
    """The metrics table in markdown."""
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(metrics)]
    return "\n".join(lines)


def error_table(metrics: Mapping[str, Any]) -> str:
    """Error-type counts per method in markdown (wrong rows only)."""
    types = [t for t in ERROR_TYPES if any(d["error_types"].get(t) for d in metrics["methods"].values())]
    if not types:
        return "(no wrong answers)"
    lines = ["| method | " + " | ".join(types) + " |", "|" + "---|" * (len(types) + 1)]
    for m, d in metrics["methods"].items():
        lines.append(f"| {method_label(m, metrics)} | " + " | ".join(str(d["error_types"].get(t, 0)) for t in types)
                     + " |")
    return "\n".join(lines)
