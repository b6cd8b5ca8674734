"""Candidate handling shared by the strategies: parse a raw string, then check it against a beam's state.

Strict mode is the verifier (verify_step / check_answer plus the target's dimension). Lenient mode is what
`prm_only` does without the verifier: a step is usable when it parses and has a value, either its claimed
value or one computed ignoring units; the real verifier's verdict is still recorded for the analysis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from pcr_ray.core.trace import Answer, ParseContext, Step, parse_answer, parse_step
from pcr_ray.core.units import try_unit_info
from pcr_ray.core.verifier import (
    AnswerValue,
    Diagnostic,
    StepResult,
    VerifierConfig,
    VerifierState,
    check_answer,
    check_step,
    make_diagnostic,
)

_LENIENT = VerifierConfig(rel_tol=1e300, abs_tol=1e300, coverage=0.0)


@dataclass(frozen=True)
class Parsed:
    """A raw candidate after parsing: a step, an answer declaration, or a diagnostic."""

    raw: str
    step: Step | None = None
    answer: tuple[Answer, ...] | None = None
    diagnostic: Diagnostic | None = None

    @property
    def ok(self) -> bool:
        return self.diagnostic is None


def parse_candidate(raw: str, index: int) -> Parsed:
    """json.loads + parse_step / parse_answer; any failure is a syntax diagnostic."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        first = str(exc).splitlines()[0]
        return Parsed(raw, diagnostic=make_diagnostic(index, "malformed", f"not valid JSON: {first}"))
    ctx = ParseContext()
    if isinstance(obj, dict) and "answer" in obj and "op" not in obj:
        ans = parse_answer(obj["answer"], ctx)
        if ans is None or not ans:
            e = ctx.errors[0] if ctx.errors else None
            msg = f"{e.path}: {e.message}" if e else "empty answer"
            return Parsed(raw, diagnostic=make_diagnostic(None, "malformed", msg))
        return Parsed(raw, answer=ans)
    step = parse_step(obj, index, ctx)
    if step is None:
        e = ctx.errors[0] if ctx.errors else None
        code = e.code if e is not None and e.code in ("malformed", "non_finite", "bad_name") else "malformed"
        return Parsed(raw, diagnostic=make_diagnostic(index, code, f"{e.path}: {e.message}" if e else "not a step"))
    return Parsed(raw, step=step)


@dataclass(frozen=True)
class StepOutcome:
    """A checked step: accepted (with its value filled and the new state) or a diagnostic.

    `verifier_ok` is what the strict verifier said (differs from `ok` only in lenient mode).
    """

    ok: bool
    step: Step | None
    state: VerifierState | None
    diagnostic: Diagnostic | None
    verifier_ok: bool


def check_step_candidate(state: VerifierState, step: Step, *, strict: bool) -> StepOutcome:
    """Strict: the verifier's incremental check. Lenient: usable if it has a claimed or computable value.

    An output named like a variable that exists ('price' for a new price) is renamed first ('price_2'): the name
    is a label, and the trace so far, rendered for the next step, shows the new one."""
    if step.out.name in state.env:
        step = replace(step, out=replace(step.out, name=_untaken(step.out.name, state.env)))
    chk = check_step(state, step)
    if chk.ok:
        assert chk.result is not None
        return StepOutcome(True, replace(step, value=chk.result.value), chk.state, None, True)
    if strict:
        return StepOutcome(False, None, None, chk.diagnostic, False)
    lenient = VerifierState(state.env, state.n_steps, _LENIENT)
    lchk = check_step(lenient, replace(step, value=None), extend=False)
    out_u = try_unit_info(step.out.unit)
    if step.value is not None and out_u is not None:
        value, base, dims = step.value, out_u.to_base(step.value), out_u.dims
    elif lchk.ok and lchk.result is not None:
        value, base, dims = lchk.result.value, lchk.result.base, lchk.result.dims
    else:
        return StepOutcome(False, None, None, lchk.diagnostic or chk.diagnostic, False)
    res = StepResult(state.n_steps, step.op, step.out.name, value, step.out.unit, base, dims, step)
    return StepOutcome(True, replace(step, value=value), state.extend(res), chk.diagnostic, False)


def _untaken(name: str, taken: object) -> str:
    """name_2, name_3, ...: the first not in `taken`."""
    k = 2
    while f"{name}_{k}" in taken:  # type: ignore[operator]
        k += 1
    return f"{name}_{k}"


@dataclass(frozen=True)
class AnswerOutcome:
    """A checked answer declaration: its values (first answer first) or a diagnostic."""

    ok: bool
    values: tuple[AnswerValue, ...]
    diagnostic: Diagnostic | None
    verifier_ok: bool


def check_answer_candidate(state: VerifierState, answer: tuple[Answer, ...], target_unit: str, *,
                           strict: bool) -> AnswerOutcome:
    """Coherence: answer variables exist, their units fit, and the first one has the asked dimension."""
    values, diags = check_answer(state, answer)
    target = try_unit_info(target_unit) if target_unit else None
    if not diags and target is not None and values and values[0].dims != target.dims:
        diags = [make_diagnostic(None, "answer_unit_mismatch", f"the question asks for '{target_unit}', but answer "
                                                     f"'{values[0].name}' is in '{values[0].unit}'")]
    if not diags:
        return AnswerOutcome(True, tuple(values), None, True)
    if strict:
        return AnswerOutcome(False, (), diags[0], False)
    a = answer[0]
    v = state.env.get(a.name)
    if v is None:
        return AnswerOutcome(False, (), diags[0], False)
    unit = a.unit or v.unit
    u = try_unit_info(unit)
    value = u.from_base(v.base) if (u is not None and u.dims == v.dims) else v.value
    return AnswerOutcome(True, (AnswerValue(a.name, value, unit, v.base, v.dims),), diags[0], False)
