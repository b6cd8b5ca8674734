"""Answer grading: numbers with units and a relative tolerance, and MATH answers with math-verify.

`grade(pred, gold, kind=...)` never raises: a malformed prediction is simply wrong, with a reason.
Numeric answers convert between units through pcr_ray.core.units (an answer in another but convertible unit is
right; one of the wrong dimension is wrong). MATH answers go through math-verify in a reused worker process
(pcr_ray.mathverify) that is killed when a call outlives its timeout, and an input-length cap; grading works
inside Ray workers and thread pools.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from pcr_ray import mathverify
from pcr_ray.core.answers import parse_quantity
from pcr_ray.core.units import UnitError, try_unit_info

# Named settings: (kind, rel_tol, abs_tol). SciBench uses a 5% relative tolerance; GSM8K is exact.
SETTINGS: dict[str, tuple[str, float, float]] = {
    "gsm8k": ("numeric", 0.0, 1e-6),
    "scibench": ("numeric", 0.05, 0.0),
    "physics": ("numeric", 1e-3, 1e-12),
    "math": ("math", 0.0, 0.0),
    "math500": ("math", 0.0, 0.0),
}
SCIBENCH_REL_TOL = 0.05
MAX_MATH_CHARS = 2000


@dataclass(frozen=True, slots=True)
class GradeResult:
    """Whether the prediction is right, and why (a short reason either way)."""

    correct: bool
    reason: str
    pred_value: float | None = None
    gold_value: float | None = None

    def __bool__(self) -> bool:
        return self.correct


# ---------------------------------------------------------------- numbers with units

_SCALE_ONLY = re.compile(r"^\s*(?:\\mathrm\{)?\s*10\s*\^\s*\{?\s*([-+−]?\d+)\s*\}?\s*\}?\s*$")


def _unit_scale(unit: str) -> tuple[float, str]:
    """A gold unit that is only a power of ten ('10^6') becomes (1e6, ''); others pass through."""
    m = _SCALE_ONLY.match(unit or "")
    if m:
        return 10.0 ** int(m.group(1).replace("−", "-")), ""
    return 1.0, unit or ""


def _clean_unit_text(u: str) -> str:
    u = u.strip().strip(".").strip()
    u = re.sub(r"^(?:of\s+|in\s+)", "", u)
    return u


def _close(p: float, g: float, rel_tol: float, abs_tol: float) -> bool:
    return abs(p - g) <= rel_tol * abs(g) + abs_tol


def grade_numeric(pred: Any, gold: Any, *, unit: str = "", pred_unit: str | None = None, rel_tol: float = 1e-6,
                  abs_tol: float = 1e-9) -> GradeResult:
    """Numeric grading with units: the prediction is converted into the gold unit before comparing."""
    # gold
    if isinstance(gold, bool) or gold is None:
        return GradeResult(False, "gold answer is not a number")
    if isinstance(gold, (int, float)):
        g_val, g_unit = float(gold), unit
    else:
        q = parse_quantity(str(gold))
        if q is None:
            return GradeResult(False, f"gold answer {str(gold)[:40]!r} is not a number")
        g_val, g_unit = q[0], unit or q[1]
    scale, g_unit = _unit_scale(g_unit)
    g_val *= scale
    g_info = try_unit_info(g_unit) if g_unit else None
    # prediction
    if pred is None or isinstance(pred, bool):
        return GradeResult(False, "no answer", None, g_val)
    if isinstance(pred, (int, float)):
        p_val, p_unit = float(pred), pred_unit or ""
    elif isinstance(pred, str):
        q = parse_quantity(pred)
        if q is None:
            return GradeResult(False, "no number in the prediction", None, g_val)
        p_val, p_unit = q[0], pred_unit if pred_unit is not None else q[1]
    else:
        return GradeResult(False, f"prediction of type {type(pred).__name__} is not a number", None, g_val)
    if not math.isfinite(p_val):
        return GradeResult(False, "prediction is not finite", None, g_val)
    p_unit = _clean_unit_text(p_unit)
    note = ""
    if g_info is not None and p_unit:
        p_scale, p_unit2 = _unit_scale(p_unit)
        p_info = try_unit_info(p_unit2) if p_unit2 else None
        if p_unit2 == "":
            p_val *= p_scale
        elif p_info is None:
            note = f" (unit {p_unit[:20]!r} not understood; read as {g_unit})"
        elif p_info.dims != g_info.dims:
            return GradeResult(False, f"wrong dimension: {p_unit!r} is not convertible to {g_unit!r}", p_val, g_val)
        else:
            try:
                if "delta_" in p_unit2 or "delta_" in g_unit:
                    # a temperature change: by the scales alone (a dataset's '°C' on a 'by how much' answer is a
                    # change too, and 58 delta_degC is 58 °C of difference, not -215.15 °C)
                    p_val = p_val * p_scale * p_info.scale / g_info.scale
                else:
                    p_val = g_info.from_base(p_info.to_base(p_val * p_scale))
            except (UnitError, ArithmeticError):
                return GradeResult(False, "unit conversion failed", p_val, g_val)
            if p_unit2 != g_unit:
                note = f" (converted from {p_unit})"
    ok = _close(p_val, g_val, rel_tol, abs_tol)
    rel = abs(p_val - g_val) / abs(g_val) if g_val else abs(p_val - g_val)
    if ok:
        return GradeResult(True, f"match within tolerance{note}", p_val, g_val)
    return GradeResult(False, f"value {p_val:.6g} vs gold {g_val:.6g} (rel. error {rel:.3g}){note}", p_val, g_val)


# ---------------------------------------------------------------- MATH answers (math-verify)


def grade_math(pred: Any, gold: Any, *, timeout_s: float = 5.0) -> GradeResult:
    """MATH-style equivalence with math-verify in a worker process, killed after `timeout_s` (thread-safe)."""
    if not isinstance(pred, (str, int, float)) or isinstance(pred, bool):
        return GradeResult(False, "no answer" if pred is None else f"prediction of type {type(pred).__name__}")
    if not isinstance(gold, (str, int, float)) or isinstance(gold, bool):
        return GradeResult(False, "gold answer is not text")
    p, g = str(pred), str(gold)
    if not p.strip():
        return GradeResult(False, "empty prediction")
    if len(p) > MAX_MATH_CHARS or len(g) > MAX_MATH_CHARS:
        return GradeResult(False, f"answer longer than {MAX_MATH_CHARS} characters")
    if p.strip() == g.strip():
        return GradeResult(True, "identical strings")
    verdict = mathverify.pool().check(p, g, timeout_s)
    if verdict.timed_out:
        return GradeResult(False, f"math-verify timed out after {timeout_s:g}s")
    if verdict.error:
        return GradeResult(False, f"math-verify error: {verdict.error}")
    if verdict.equal:
        return GradeResult(True, "math-verify: equivalent")
    return GradeResult(False, "math-verify: not equivalent")


# ---------------------------------------------------------------- entry points


def grade(pred: Any, gold: Any, *, kind: str = "numeric", rel_tol: float = 1e-6, abs_tol: float = 1e-9,
          unit: str = "", pred_unit: str | None = None, timeout_s: float = 5.0) -> GradeResult:
    """Grade one prediction against one gold answer. kind: 'numeric' (units, tolerance) or 'math' (math-verify).

    Never raises: any failure becomes GradeResult(False, reason).
    """
    try:
        if kind == "numeric":
            return grade_numeric(pred, gold, unit=unit, pred_unit=pred_unit, rel_tol=rel_tol, abs_tol=abs_tol)
        if kind == "math":
            res = grade_math(pred, gold, timeout_s=timeout_s)
            if not res.correct and isinstance(gold, (int, float, str)) and not isinstance(gold, bool):
                # plain numbers that math-verify could not read ('1,000' vs '1000') still count
                num = grade_numeric(pred, gold, rel_tol=1e-9, abs_tol=1e-12)
                if num.correct and not re.search(r"[a-zA-Z\\]", str(gold).replace("\\frac", "")):
                    return GradeResult(True, "equal as numbers", num.pred_value, num.gold_value)
            return res
        return GradeResult(False, f"unknown grading kind {kind!r}")
    except Exception as exc:  # noqa: BLE001 - grading must not take a pipeline down
        return GradeResult(False, f"grading error: {type(exc).__name__}: {exc}"[:200])


# grading modes: `default` (each source's own setting above) or `scibench`: SciBench problems as SciBench's own
# grader (`equiv` in its eval_zero.py) does: the answer in the problem's stated unit within 0.1 absolute when the
# book's number is at least 1, within 10% relative below
GRADING_MODES = ("default", "scibench")


def check_grading_mode(mode: str) -> str:
    """`mode` when it is one of GRADING_MODES; else a ValueError naming them."""
    if mode not in GRADING_MODES:
        raise ValueError(f"grading.mode must be one of {GRADING_MODES}, got {mode!r}")
    return mode


def grade_problem(pred: Any, problem: Any, *, pred_unit: str | None = None, timeout_s: float = 5.0,
                  mode: str = "default") -> GradeResult:
    """Grade against a `Problem` with the setting of its source (GSM8K exact, SciBench 5%, MATH math-verify); a
    problem of another source (your own file) numerically when its answer is a number, else with math-verify.
    mode="scibench" grades SciBench problems by SciBench's own rule (GRADING_MODES)."""
    default = ("numeric", 1e-6, 1e-9) if problem.answer_value is not None else ("math", 0.0, 0.0)
    kind, rel, ab = SETTINGS.get(problem.source, default)
    if check_grading_mode(mode) == "scibench" and problem.source == "scibench" and problem.answer_value is not None:
        scale = _unit_scale(problem.answer_unit or "")[0]  # the book's number is in the stated unit, 10^k included
        rel, ab = (0.0, 0.1 * scale) if problem.answer_value >= 1 else (0.1, 0.0)
    if kind == "math":
        return grade(pred, problem.answer, kind="math", timeout_s=timeout_s)
    gold = problem.answer_value if problem.answer_value is not None else problem.answer
    return grade(pred, gold, kind="numeric", rel_tol=rel, abs_tol=ab, unit=problem.answer_unit or "",
                 pred_unit=pred_unit)
