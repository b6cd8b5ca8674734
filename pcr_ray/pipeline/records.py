"""Result rows of the evaluation, Ray-free: a work item's problem, a search's or a baseline's row, its grade.

The pipeline's search workers build and grade rows with these functions; so does anything that runs the
searches without Ray (benchmarks/bench_one_backbone.py)."""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pcr_ray.core.trace import Given
from pcr_ray.grading import grade_problem
from pcr_ray.pipeline.metrics import classify_error, horizon_of, template_split_of
from pcr_ray.search import SearchProblem

PROBLEM_KEYS = ("id", "source", "text", "answer", "answer_value", "answer_unit", "level", "subject", "gold_trace",
                 "gold_steps")


def givens_to_json(givens: Sequence[Any]) -> str:
    """Givens as the JSON list a work item carries (sp_givens)."""
    return json.dumps([{"name": g.name, "value": g.value, "unit": g.unit, "desc": g.desc} for g in givens])


def clean_value(v: Any) -> Any:
    """None for NaN, a plain Python value for a numpy scalar, else v."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            return v.item()
        except (ValueError, AttributeError):
            return v
    return v


def problem_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """The problem's own fields of a work item (NaN and numpy scalars as plain Python)."""
    return {k: clean_value(row.get(k)) for k in PROBLEM_KEYS}


def with_givens(row: Mapping[str, Any], givens_mode: str) -> dict[str, Any]:
    """The work item with its givens extracted (`pipeline.givens`: extract, or gold: the oracle ablation):
    sp_givens (JSON), sp_target_unit, givens_source, extract_failed (what extraction did not find:
    extract_failures) and extract_error (empty, or why extraction raised; the row is then recorded as an error, not
    searched)."""
    out = dict(row)
    try:
        sp = SearchProblem.from_problem(problem_dict(row), givens=givens_mode)
        out.update(sp_givens=givens_to_json(sp.givens), sp_target_unit=sp.target_unit,
                   givens_source=sp.givens_source, extract_failed="; ".join(extract_failures(sp)), extract_error="")
    except Exception as exc:
        out.update(sp_givens="[]", sp_target_unit="", givens_source="", extract_failed="",
                   extract_error=f"givens extraction failed: {type(exc).__name__}: {exc}"[:300])
    return out


# what a problem's extraction can fail to find (results' extract_failed, metrics' `extraction`)
NO_GIVENS, NO_TARGET = "no givens", "no asked quantity"


def extract_failures(sp: SearchProblem) -> list[str]:
    """What the extractor did not find in the problem's text (the oracle's gold givens: nothing to report)."""
    if sp.givens_source == "gold":
        return []
    return [why for why, missing in ((NO_GIVENS, not sp.givens), (NO_TARGET, not sp.target_unit)) if missing]


def search_problem(row: Mapping[str, Any]) -> SearchProblem:
    """The SearchProblem of a work item whose givens were extracted (with_givens)."""
    givens = tuple(Given(g["name"], float(g["value"]), g.get("unit") or "dimensionless", g.get("desc", ""))
                   for g in json.loads(row.get("sp_givens") or "[]"))
    gs = clean_value(row.get("gold_steps"))
    return SearchProblem(str(row["id"]), str(row["text"]), givens, str(row.get("sp_target_unit") or ""),
                         clean_value(row.get("answer_value")), str(row.get("answer_unit") or ""),
                         str(row.get("source")),
                         None if gs is None else int(gs), str(row.get("givens_source") or ""))


def exc_text(exc: BaseException) -> str:
    """'Type: message at file:line', at most 500 characters: an exception as a row's error."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"[:500]


def base_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every result row of a work item has, whatever happened to it."""
    gt = clean_value(row.get("gold_trace"))
    gs = clean_value(row.get("gold_steps"))
    return {
        "problem_id": str(row["id"]), "source": str(row.get("source") or ""), "method": str(row["method"]),
        "question": str(row.get("text") or ""), "gold_answer": str(row.get("answer") or ""),
        "gold_value": clean_value(row.get("answer_value")), "gold_unit": str(row.get("answer_unit") or ""),
        "gold_steps": gs, "horizon": horizon_of(gs), "template_split": template_split_of(gt),
        "gold_trace_json": gt or "",
        "givens_json": row.get("sp_givens") or "", "givens_source": row.get("givens_source") or "",
        "extract_failed": row.get("extract_failed") or "",
        "target_unit": row.get("sp_target_unit") or "",
    }


def error_record(row: Mapping[str, Any], error: str, attempts: int, worker: str = "") -> dict[str, Any]:
    """The row of a problem that could not be run: no answer, the reason in `error`."""
    return {**base_record(row), "answered": False, "stop_reason": "error", "error": error or "unknown error",
            "attempts": attempts, "worker": worker}


def _loads(s: Any, default: Any) -> Any:
    if isinstance(s, (list, dict)):
        return s
    try:
        return json.loads(s) if s else default
    except (TypeError, ValueError):
        return default


def search_record(row: Mapping[str, Any], res: Any) -> dict[str, Any]:
    """A result row from a SearchResult (see pcr_ray.search) and its work item."""
    rec = res.to_record() if hasattr(res, "to_record") else dict(res)
    steps = _loads(rec.get("steps"), [])
    verdicts = [s.get("verdict", "ok" if s.get("ok", True) else "rejected") if isinstance(s, dict) else ""
                for s in steps]
    scores = [s.get("score") if isinstance(s, dict) else None for s in steps]
    value = rec.get("answer_value")
    unit = rec.get("answer_unit") or ""
    if value is None:
        answer = ""
    else:
        answer = f"{value:.10g} {unit}".strip() if isinstance(value, (int, float)) else str(value)
    out = {
        **base_record(row),
        "generator": str(rec.get("generator", "")),
        "answer": answer, "answer_value": value, "answer_unit": unit,
        "answered": value is not None,
        "stop_reason": rec.get("stop_reason", ""), "error": rec.get("error", "") or "",
        "trace_json": rec.get("trace") if rec.get("trace") not in ("null", None) else "",
        "trace_ok": bool(rec.get("trace_ok")),
        "step_verdicts": json.dumps(verdicts), "step_scores": json.dumps(scores),
        "n_steps": len(steps), "candidates": rec.get("n_proposed", 0),
        "verifier_rejections": max(0, int(rec.get("n_parsed", 0) or 0) - int(rec.get("n_verified", 0) or 0)),
        "prm_calls": rec.get("n_prm_calls", 0), "generator_calls": rec.get("iterations", 0),
        "prompt_tokens": rec.get("prompt_tokens", 0), "output_tokens": rec.get("output_tokens", 0),
        "prm_tokens": rec.get("prm_tokens", 0),
        "time_s": _attributed_seconds(rec),
        "wall_s": rec.get("wall_s"),
    }
    cands = _loads(rec.get("candidates"), [])
    if cands and isinstance(cands[-1], dict) and cands[-1].get("kind") in ("direct", "python"):
        out["raw_output"] = str(cands[-1].get("candidate", ""))[:2000]
    for k in ("n_parsed", "n_verified", "n_scored", "n_cache_hits", "retries", "backtracks", "gen_s", "verify_s",
              "prm_s", "score", "final_diagnostics", "reject_codes", "round_stats", "answer_name"):
        if k in rec:
            out[k] = rec[k]
    samples = _loads(rec.get("samples"), [])
    if samples:  # the answered traces selection chose among (extra_json; the scaling experiment reads them)
        out["samples"] = samples
    return out


def _attributed_seconds(rec: Mapping[str, Any]) -> float | None:
    """Seconds of generation, verification and PRM scoring attributed to this problem (its share of batched
    calls); the wall time from batch start when the parts are not reported."""
    parts = [rec.get(k) for k in ("gen_s", "verify_s", "prm_s")]
    if any(isinstance(x, (int, float)) and x > 0 for x in parts):
        return float(sum(x for x in parts if isinstance(x, (int, float))))
    return rec.get("wall_s")


def grade_row(r: dict[str, Any], mode: str = "default") -> dict[str, Any]:
    """A graded copy of a row: correct, flagged (the system signalled trouble), silent_failure, error type."""
    r = {k: clean_value(v) for k, v in r.items()}
    answered = bool(r.get("answered"))
    correct = False
    if answered and not r.get("error"):
        try:
            correct, r["grade_reason"] = grade_answer(r, mode)
        except Exception as exc:  # grading never raises by contract; a bug must not lose the row
            r["grade_reason"] = f"grading failed: {exc_text(exc)}"
    flagged = (not answered) or bool(r.get("error")) or str(r.get("stop_reason") or "") in FLAG_STOPS
    r["correct"] = correct
    r["flagged"] = flagged
    r["silent_failure"] = answered and not correct and not flagged
    etype, detail = classify_error(r, r.get("gold_trace_json") or None)
    r["error_type"], r["error_detail"] = etype, detail
    return r


def grade_answer(r: Mapping[str, Any], mode: str = "default") -> tuple[bool, str]:
    """(correct, reason) of the row's answer against the gold one, with its source's setting (pcr_ray.grading)."""
    gold = SimpleNamespace(source=r.get("source") or "", answer=r.get("gold_answer") or "",
                           answer_value=r.get("gold_value"), answer_unit=r.get("gold_unit") or "")
    res = grade_problem(r.get("answer_value"), gold, pred_unit=r.get("answer_unit") or "", mode=mode)
    return bool(res.correct), str(res.reason)


# stop reasons by which a method itself says its answer is not to be trusted
FLAG_STOPS = frozenset({"error", "max_steps", "exhausted", "no_candidates", "timeout", "unverified"})
