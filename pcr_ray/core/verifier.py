"""The symbolic verifier V(J) -> Verdict: syntax, unit propagation (with recomputation), coherence.

It never raises on a trace, however malformed: every rejection is a Diagnostic(step, stage, code, message).
`VerifierState` + `verify_step` is the incremental form used by search: checking one candidate step looks
up only its arguments (O(1) in the prefix length); accepting it makes a new state.
"""

from __future__ import annotations

import inspect
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pcr_ray.core.counts import CHECKED_FAMILY, count_error, counts_something, kinds_or_none
from pcr_ray.core.primitives import REGISTRY, DimError, DomainError, Primitive, families
from pcr_ray.core.primitives.registry import VARIADIC_MAX
from pcr_ray.core.temperature import CHANGE, answer_role_error, checks_op, given_role, step_role
from pcr_ray.core.trace import NAME_RE, Answer, Given, ParseContext, Step, Trace, parse_step, parse_trace
from pcr_ray.core.units import DIMENSIONLESS, Dims, UnitError, UnitInfo, format_dims, format_kinds, unit_info

SYNTAX, UNITS, COHERENCE = "syntax", "units", "coherence"

# code -> stage; every diagnostic code the verifier emits is listed here (the docs table reads it).
CODES: dict[str, tuple[str, str]] = {
    "malformed": (SYNTAX, "the JSON does not have the shape of a trace or step"),
    "non_finite": (SYNTAX, "a number is NaN or infinite"),
    "bad_name": (SYNTAX, "a variable name is not an identifier"),
    "unknown_op": (SYNTAX, "the op is not a registered primitive"),
    "missing_arg": (SYNTAX, "a parameter of the op has no argument"),
    "extra_arg": (SYNTAX, "an argument names no parameter of the op"),
    "bad_arg": (SYNTAX, "an argument has the wrong kind (e.g. an unknown constant name)"),
    "undefined_var": (SYNTAX, "an argument names a variable not defined earlier"),
    "redefined_var": (SYNTAX, "a step or given defines a name that already exists"),
    "bad_unit": (SYNTAX, "a unit string does not parse"),
    "unit_mismatch": (UNITS, "arguments violate the op's dimension rule"),
    "count_mismatch": (UNITS, "a step or answer counts the wrong thing: sacks added to oranges, an output or "
                              "answer that counts other than its arguments, a plain factor that counts"),
    "not_dimensionless": (UNITS, "an argument that must be dimensionless has units"),
    "wrong_out_unit": (UNITS, "the declared output unit has the wrong dimension"),
    "domain_error": (UNITS, "the op cannot be evaluated on these values (sqrt of a negative, ...)"),
    "arithmetic_error": (UNITS, "the claimed value disagrees with the recomputed one"),
    "temperature_reading_as_change": (UNITS, "a temperature reading (e.g. a given in degC) where a temperature "
                                             "change belongs (delta_t)"),
    "temperature_change_as_reading": (UNITS, "a temperature change where an absolute temperature belongs"),
    "temperature_reading_arithmetic": (UNITS, "two temperature readings added, or a reading subtracted from a "
                                              "change"),
    "no_answer": (COHERENCE, "the trace declares no answer"),
    "answer_undefined": (COHERENCE, "an answer names a variable that does not exist"),
    "answer_unit_mismatch": (COHERENCE, "an answer is requested in a unit of the wrong dimension"),
    "answer_temperature_role": (COHERENCE, "a temperature change answered in a reading's unit (degC, degF), or "
                                           "a reading in a change's unit (delta_degC)"),
}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """Why something was rejected: step index (None for givens/answer), stage, code and a short message."""

    step: int | None
    stage: str
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "stage": self.stage, "code": self.code, "message": self.message}

    def feedback(self) -> str:
        """One line, fit to be fed back to a generator."""
        where = f"step {self.step}" if self.step is not None else "trace"
        return f"{where}: {self.code}: {self.message}"


def make_diagnostic(step: int | None, code: str, message: str) -> Diagnostic:
    """A Diagnostic for `code` (its stage looked up in CODES)."""
    return Diagnostic(step, CODES[code][0], code, message)


@dataclass(frozen=True, slots=True)
class Var:
    """A defined variable: value in SI base units, dimension vector, its declared unit and value in it, and its
    temperature role (pcr_ray.core.temperature: 'reading', 'change' or '' when unknown or not a temperature)."""

    name: str
    base: float
    dims: Dims
    unit: str
    value: float
    temp: str = ""


@dataclass(frozen=True, slots=True)
class StepResult:
    """An accepted step: the op, the variable it defined and its recomputed value in the declared unit."""

    index: int
    op: str
    name: str
    value: float
    unit: str
    base: float
    dims: Dims
    step: Step | None = None
    temp: str = ""  # temperature role of the output (pcr_ray.core.temperature)

    def call_text(self) -> str:
        """The step as 'op(param=arg, ...)'."""
        if self.step is None:
            return f"{self.op}(...)"
        return f"{self.op}(" + ", ".join(f"{k}={v}" for k, v in self.step.args.items()) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "op": self.op, "name": self.name, "value": self.value, "unit": self.unit,
                "dimension": format_dims(self.dims), "call": self.call_text()}


@dataclass(frozen=True, slots=True)
class AnswerValue:
    """An answer variable's value, converted into the requested unit."""

    name: str
    value: float
    unit: str
    base: float
    dims: Dims

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "dimension": format_dims(self.dims)}


@dataclass(frozen=True, slots=True)
class VerifierConfig:
    """rel_tol/abs_tol: tolerance on claimed values; coverage: fraction of families whose unit rules are checked."""

    rel_tol: float = 1e-6
    abs_tol: float = 1e-9
    coverage: float = 1.0
    max_steps: int = 256


DEFAULT_CONFIG = VerifierConfig()


def covered_families(coverage: float) -> frozenset[str]:
    return _covered_families(coverage, len(REGISTRY))


@lru_cache(maxsize=64)
def _covered_families(coverage: float, _registry_size: int) -> frozenset[str]:
    """The deterministic subset of families whose unit rules are checked at this coverage (for the ablation).

    Families are ordered by a stable hash of their name; the first round(coverage * n) are covered.
    'arithmetic' is ordered like any other family.
    """
    fams = families()
    if coverage >= 1.0:
        return frozenset(fams)
    ordered = sorted(fams, key=lambda f: (zlib.crc32(f.encode()), f))
    k = max(0, min(len(ordered), round(coverage * len(ordered))))
    return frozenset(ordered[:k])


_NEEDS_ENV: dict[str, bool] = {}


def _needs_env(prim: Primitive) -> bool:
    hit = _NEEDS_ENV.get(prim.name)
    if hit is None:
        try:
            hit = "_env" in inspect.signature(prim.fn).parameters
        except (TypeError, ValueError):
            hit = False
        _NEEDS_ENV[prim.name] = hit
    return hit


def _close(claimed: float, computed: float, cfg: VerifierConfig) -> bool:
    return abs(claimed - computed) <= cfg.rel_tol * max(abs(claimed), abs(computed)) + cfg.abs_tol


def _fmt(x: float) -> str:
    return f"{x:.6g}"


class VerifierState:
    """Variables defined so far (givens and accepted steps). Treat as immutable: `extend` returns a new state."""

    __slots__ = ("env", "n_steps", "config", "_covered")

    def __init__(self, env: dict[str, Var], n_steps: int, config: VerifierConfig,
                 covered: frozenset[str] | None = None) -> None:
        self.env = env
        self.n_steps = n_steps
        self.config = config
        self._covered = covered if covered is not None else covered_families(config.coverage)

    @classmethod
    def from_givens(cls, givens: tuple[Given, ...] | list[Given],
                    config: VerifierConfig = DEFAULT_CONFIG) -> tuple[VerifierState, list[Diagnostic]]:
        """A state holding the givens; diagnostics for bad units, bad values and duplicate names."""
        env: dict[str, Var] = {}
        diags: list[Diagnostic] = []
        for g in givens:
            if g.name in env:
                diags.append(make_diagnostic(None, "redefined_var", f"given '{g.name}' is defined twice"))
                continue
            if not (isinstance(g.value, (int, float)) and math.isfinite(g.value)):
                diags.append(make_diagnostic(None, "non_finite", f"given '{g.name}' has a non-finite value"))
                continue
            try:
                u = unit_info(g.unit)
            except UnitError as exc:
                diags.append(make_diagnostic(None, "bad_unit", f"given '{g.name}': {exc}"))
                continue
            env[g.name] = Var(g.name, u.to_base(float(g.value)), u.dims, g.unit, float(g.value), given_role(g.unit))
        return cls(env, 0, config), diags

    def extend(self, result: StepResult) -> VerifierState:
        env = dict(self.env)
        env[result.name] = Var(result.name, result.base, result.dims, result.unit, result.value, result.temp)
        return VerifierState(env, self.n_steps + 1, self.config, self._covered)

    def variables(self) -> list[Var]:
        return list(self.env.values())

    def is_covered(self, family: str) -> bool:
        return family in self._covered


@dataclass(frozen=True, slots=True)
class StepCheck:
    """The outcome of checking one step against a state: a result and the new state, or a diagnostic."""

    ok: bool
    result: StepResult | None
    diagnostic: Diagnostic | None
    state: VerifierState | None  # the extended state when ok


def _arg_names(prim: Primitive, args: dict[str, Any], idx: int) -> tuple[list[str], Diagnostic | None]:
    if prim.variadic:
        names = [f"x{i}" for i in range(1, VARIADIC_MAX + 1)]
        present = [n for n in names if n in args]
        extra = sorted(set(args) - set(names))
        if extra:
            return [], make_diagnostic(idx, "extra_arg", f"{prim.name} takes x1..x{VARIADIC_MAX}, not {extra}")
        if len(present) < 2 or present != names[: len(present)]:
            return [], make_diagnostic(idx, "missing_arg", f"{prim.name} needs consecutive arguments x1, x2[, x3 ...]")
        return present, None
    pnames = prim.param_names
    missing = [p for p in pnames if p not in args]
    if missing:
        return [], make_diagnostic(idx, "missing_arg", f"{prim.name} is missing argument(s) {missing}; signature "
                                             f"{prim.signature()}")
    extra = sorted(set(args) - set(pnames))
    if extra:
        msg = f"{prim.name} has no parameter(s) {extra}; signature {prim.signature()}"
        return [], make_diagnostic(idx, "extra_arg", msg)
    return list(pnames), None


def check_step(state: VerifierState, step: Step, index: int | None = None, extend: bool = True) -> StepCheck:
    """Check one parsed step against `state` without changing it (never raises).

    With extend=True an accepted step comes back with the extended state (a new object).
    """
    idx = state.n_steps if index is None else index
    try:
        return _check_step(state, step, idx, extend)
    except Exception as exc:  # a bug in a primitive must not take the verifier down
        return StepCheck(False, None, make_diagnostic(idx, "domain_error", f"{step.op}: evaluation failed: "
                                                                 f"{type(exc).__name__}: {exc}"[:300]), None)


@dataclass(frozen=True, slots=True)
class _Plan:
    """Per-primitive data precomputed once for the hot path."""

    prim: Primitive
    keys: frozenset[str]
    # (name, kind, rkind, rdims, rref) per parameter, in order
    params: tuple[tuple[str, str, str, Dims | None, str], ...]
    all_vars: bool
    needs_env: bool
    post_check: bool  # a 'same' constraint refers forward, or non-variable params: run check_args after the loop
    rule_uses_values: bool


_PLANS: dict[str, _Plan] = {}


def _plan(prim: Primitive) -> _Plan:
    pl = _PLANS.get(prim.name)
    if pl is None or pl.prim is not prim:
        ps = tuple((p.name, p.kind, p.rkind, p.rdims, p.rref) for p in prim.params)
        seen: set[str] = set()
        forward = False
        for p in prim.params:
            forward |= p.rkind == "same" and p.rref not in seen
            seen.add(p.name)
        all_vars = all(p.kind == "var" for p in prim.params)
        pl = _Plan(prim, frozenset(prim.param_names), ps, all_vars, _needs_env(prim), forward or not all_vars,
                   getattr(prim.out, "uses_values", True))
        _PLANS[prim.name] = pl
    return pl


def _check_step(state: VerifierState, step: Step, idx: int, extend: bool) -> StepCheck:
    prim = REGISTRY.get(step.op)
    if prim is None:
        return _fail(idx, "unknown_op", f"unknown op '{step.op}'")
    env = state.env
    out_name = step.out.name
    if out_name in env:
        return _fail(idx, "redefined_var", f"'{out_name}' is already defined; choose a new name")
    args = step.args
    if prim.variadic:
        return _check_variadic(state, step, idx, extend, prim)
    pl = _PLANS.get(prim.name) or _plan(prim)
    if args.keys() != pl.keys:
        _, d = _arg_names(prim, args, idx)
        assert d is not None
        return StepCheck(False, None, d, None)
    try:
        out_u: UnitInfo = unit_info(step.out.unit)
    except UnitError as exc:
        return _fail(idx, "bad_unit", f"out unit: {exc}")
    covered = state.is_covered(prim.family)
    arg_dims: dict[str, Dims] = {}
    values: list[Any] = []
    for n, kind, rkind, rdims, rref in pl.params:
        a = args[n]
        if kind == "var":
            if a.__class__ is str:
                v = env.get(a)
                if v is None:
                    what = "not a valid name" if not NAME_RE.match(a) else "not defined earlier"
                    return _fail(idx, "undefined_var", f"{prim.name}: argument '{n}' = '{a}' is {what}")
                d = v.dims
                values.append(v.base)
            else:
                x = float(a)
                if not math.isfinite(x):
                    return _fail(idx, "non_finite", f"{prim.name}: literal for '{n}' is not finite")
                d = DIMENSIONLESS
                values.append(x)
            arg_dims[n] = d
            if covered and rkind != "any":
                if rkind == "exact":
                    if d != rdims:
                        return _dim_fail(idx, DimError(f"{prim.name}: argument '{n}' must have the dimension of "
                                                       f"{dict((q.name, q.dim) for q in prim.params)[n]}"), arg_dims)
                elif rkind == "dimless":
                    if d != DIMENSIONLESS:
                        return _dim_fail(idx, DimError(f"{prim.name}: argument '{n}' must be dimensionless",
                                                       "not_dimensionless"), arg_dims)
                elif rkind == "same" and rref in arg_dims and d != arg_dims[rref]:
                    return _dim_fail(idx, DimError(f"{prim.name}: '{n}' and '{rref}' must have the same dimension"),
                                     arg_dims)
        elif kind == "name":
            p = prim.params[len(values)]
            if not isinstance(a, str) or (p.choices and a not in p.choices):
                hint = f"; one of {', '.join(p.choices[:12])}{', ...' if len(p.choices) > 12 else ''}" \
                    if p.choices else ""
                return _fail(idx, "bad_arg", f"{prim.name}: '{n}' must be a name{hint}, got {a!r}")
            values.append(a)
        else:  # expr
            if not isinstance(a, str):
                return _fail(idx, "bad_arg", f"{prim.name}: '{n}' must be an expression string")
            values.append(a)
    if covered:
        # 'same' constraints that refer forward (y before x in the params order) are checked here
        if pl.post_check:
            try:
                prim.check_args(arg_dims)
            except DimError as exc:
                return _dim_fail(idx, exc, arg_dims)
        try:
            if prim.out_dims is not None:
                out_dims = prim.out_dims
            elif prim.out_ref:
                out_dims = arg_dims[prim.out_ref]
            else:
                vals = {n: v for (n, *_), v in zip(pl.params, values, strict=True)} if pl.rule_uses_values else {}
                out_dims = prim.out(arg_dims, vals)  # type: ignore[operator]
        except DimError as exc:
            return _dim_fail(idx, exc, arg_dims)
        if out_dims != out_u.dims:
            return _fail(idx, "wrong_out_unit", f"{prim.name} gives {format_dims(out_dims)}, but out unit "
                                                f"'{step.out.unit}' is {format_dims(out_u.dims)}")
        units = {n: env[args[n]].unit for n, kind, *_ in pl.params if kind == "var" and args[n].__class__ is str}
        if counts_something(step.out.unit) or any(counts_something(u) for u in units.values()):
            units = {n: units.get(n) for n, kind, *_ in pl.params if kind == "var"}  # None: a literal
            bad = count_error(prim, units, step.out.unit,
                              {n: v for (n, *_), v in zip(pl.params, values, strict=True)}
                              if prim.family == CHECKED_FAMILY else None)
            if bad is not None:
                return _fail(idx, *bad)
    else:
        out_dims = out_u.dims
    temp = ""
    if covered and checks_op(prim.name):
        temp, code, msg = step_role(prim.name, args, _role_in(env))
        if code:
            return _fail(idx, code, msg)
    if pl.needs_env:
        kw = {n: v for (n, *_), v in zip(pl.params, values, strict=True)}
        kw["_env"] = {k: v.base for k, v in env.items() if v.dims == DIMENSIONLESS}
        return _finish(state, step, idx, extend, prim, out_u, out_dims, prim.fn, (), kw, temp)
    return _finish(state, step, idx, extend, prim, out_u, out_dims, prim.fn, values, None, temp)


def _role_in(env: dict[str, Var]) -> Callable[[str], str]:
    def role(name: str) -> str:
        v = env.get(name)
        return v.temp if v is not None else ""
    return role


def _dim_fail(idx: int, exc: DimError, arg_dims: dict[str, Dims]) -> StepCheck:
    detail = ", ".join(f"{k} is {format_dims(v)}" for k, v in arg_dims.items())
    return _fail(idx, exc.code, f"{exc} ({detail})")


def _check_variadic(state: VerifierState, step: Step, idx: int, extend: bool, prim: Primitive) -> StepCheck:
    names, d = _arg_names(prim, step.args, idx)
    if d is not None:
        return StepCheck(False, None, d, None)
    try:
        out_u: UnitInfo = unit_info(step.out.unit)
    except UnitError as exc:
        return _fail(idx, "bad_unit", f"out unit: {exc}")
    kwargs: dict[str, float] = {}
    arg_dims: dict[str, Dims] = {}
    for n in names:
        a = step.args[n]
        if isinstance(a, str):
            v = state.env.get(a)
            if v is None:
                return _fail(idx, "undefined_var", f"{prim.name}: argument '{n}' = '{a}' is not defined earlier")
            arg_dims[n], kwargs[n] = v.dims, v.base
        else:
            if not math.isfinite(float(a)):
                return _fail(idx, "non_finite", f"{prim.name}: literal for '{n}' is not finite")
            arg_dims[n], kwargs[n] = DIMENSIONLESS, float(a)
    if state.is_covered(prim.family):
        d0 = arg_dims[names[0]]
        for n in names[1:]:
            if arg_dims[n] != d0:
                return _fail(idx, "unit_mismatch", f"{prim.name}: all arguments need one dimension; '{names[0]}' "
                                                   f"is {format_dims(d0)}, '{n}' is {format_dims(arg_dims[n])}")
        if prim.params[0].rkind == "dimless" and d0 != DIMENSIONLESS:
            return _fail(idx, "not_dimensionless", f"{prim.name}: arguments must be dimensionless")
        out_dims = prim.out_dims_for({"x1": d0}, kwargs)
        if out_dims != out_u.dims:
            return _fail(idx, "wrong_out_unit", f"{prim.name} gives {format_dims(out_dims)}, but out unit "
                                                f"'{step.out.unit}' is {format_dims(out_u.dims)}")
        bad = count_error(prim, {n: (state.env[step.args[n]].unit if isinstance(step.args[n], str) else None)
                                 for n in names}, step.out.unit)
        if bad is not None:
            return _fail(idx, *bad)
    else:
        out_dims = out_u.dims
    temp = ""
    if state.is_covered(prim.family) and checks_op(prim.name):
        temp, code, msg = step_role(prim.name, {n: step.args[n] for n in names}, _role_in(state.env))
        if code:
            return _fail(idx, code, msg)
    return _finish(state, step, idx, extend, prim, out_u, out_dims, prim.fn, (), kwargs, temp)


def _finish(state: VerifierState, step: Step, idx: int, extend: bool, prim: Primitive, out_u: UnitInfo,
            out_dims: Dims, fn: Any, pos: Any, kw: dict[str, Any] | None, temp: str = "") -> StepCheck:
    try:
        base = fn(*pos) if kw is None else fn(**kw)
    except DomainError as exc:
        return _fail(idx, "domain_error", f"{prim.name}: {exc}")
    except (ZeroDivisionError, ValueError, OverflowError, ArithmeticError) as exc:
        return _fail(idx, "domain_error", f"{prim.name}: {type(exc).__name__}: {exc}")
    if base.__class__ is not float:
        if isinstance(base, complex) or not isinstance(base, (int, float)):
            return _fail(idx, "domain_error", f"{prim.name}: result is not a real number")
        base = float(base)
    if not math.isfinite(base):
        return _fail(idx, "domain_error", f"{prim.name}: result is not finite")
    # a temperature change in an offset unit (a rise of 90 degC) converts by the scale alone, as delta_degC does
    value = (base - out_u.offset) / out_u.scale if temp != CHANGE else base / out_u.scale
    if not math.isfinite(value):
        return _fail(idx, "domain_error", f"{prim.name}: {_fmt(base)} in base units overflows in "
                                          f"'{step.out.unit}'; choose a larger unit")
    claimed = step.value
    if claimed is not None:
        cfg = state.config
        if abs(claimed - value) > cfg.rel_tol * max(abs(claimed), abs(value)) + cfg.abs_tol:
            return _fail(idx, "arithmetic_error", f"{prim.name}: claimed {_fmt(claimed)} {step.out.unit}, "
                                                  f"but it computes to {_fmt(value)} {step.out.unit}")
    result = StepResult(idx, prim.name, step.out.name, value, step.out.unit, base, out_dims, step, temp)
    return StepCheck(True, result, None, state.extend(result) if extend else None)


def _fail(idx: int, code: str, msg: str) -> StepCheck:
    return StepCheck(False, None, make_diagnostic(idx, code, msg), None)


def verify_step(state: VerifierState, step: Step | dict[str, Any], index: int | None = None) -> StepCheck:
    """Incremental verification: check one step (parsed or JSON-like) against a state; never raises."""
    idx = state.n_steps if index is None else index
    if not isinstance(step, Step):
        ctx = ParseContext()
        parsed = parse_step(step, idx, ctx)
        if parsed is None:
            e = ctx.errors[0] if ctx.errors else None
            code = e.code if e else "malformed"
            return _fail(idx, code, f"{e.path}: {e.message}" if e else "not a step")
        step = parsed
    return check_step(state, step, idx)


def check_answer(state: VerifierState,
                 answer: tuple[Answer, ...] | list[Answer]) -> tuple[list[AnswerValue], list[Diagnostic]]:
    """Coherence: answers exist, and their requested units have the variables' dimensions."""
    values: list[AnswerValue] = []
    diags: list[Diagnostic] = []
    if not answer:
        return values, [make_diagnostic(None, "no_answer", "the trace declares no answer")]
    for a in answer:
        v = state.env.get(a.name)
        if v is None:
            diags.append(make_diagnostic(None, "answer_undefined", f"answer '{a.name}' is not a defined variable"))
            continue
        unit = a.unit or v.unit
        try:
            u = unit_info(unit)
        except UnitError as exc:
            diags.append(make_diagnostic(None, "bad_unit", f"answer '{a.name}': {exc}"))
            continue
        if u.dims != v.dims:
            diags.append(make_diagnostic(None, "answer_unit_mismatch", f"answer '{a.name}' is {format_dims(v.dims)}, "
                                                             f"but '{unit}' is {format_dims(u.dims)}"))
            continue
        mine, asked = kinds_or_none(v.unit), kinds_or_none(unit)
        if mine is not None and asked is not None and mine != asked:
            diags.append(make_diagnostic(None, "count_mismatch", f"answer '{a.name}' counts "
                                         f"{format_kinds(mine)}, but '{unit}' counts {format_kinds(asked)}"))
            continue
        role_msg = answer_role_error(v.temp, unit)
        if role_msg:
            diags.append(make_diagnostic(None, "answer_temperature_role", f"answer '{a.name}' {role_msg}"))
            continue
        shown = u.from_base(v.base) if v.temp != CHANGE else v.base / u.scale  # a change: no offset
        if not math.isfinite(shown):
            diags.append(make_diagnostic(None, "answer_unit_mismatch", f"answer '{a.name}' overflows in '{unit}'"))
            continue
        values.append(AnswerValue(a.name, shown, unit, v.base, v.dims))
    return values, diags


@dataclass(frozen=True, slots=True)
class Verdict:
    """The verifier's judgement of a whole trace."""

    ok: bool
    diagnostics: tuple[Diagnostic, ...]
    steps: tuple[StepResult, ...] = ()
    answer: tuple[AnswerValue, ...] = ()
    n_steps: int = 0
    givens: tuple[Var, ...] = field(default=())

    @property
    def first_failure(self) -> Diagnostic | None:
        return self.diagnostics[0] if self.diagnostics else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "n_steps": self.n_steps,
            "steps": [s.to_dict() for s in self.steps],
            "answer": [a.to_dict() for a in self.answer],
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }

    def format_text(self) -> str:
        """A readable verdict: each step with its value and unit, the answer, and the first failure explained."""
        lines = []
        for g in self.givens:
            lines.append(f"  given {g.name} = {_fmt(g.value)} {g.unit}")
        for s in self.steps:
            lines.append(f"  [{s.index}] {s.name} = {s.call_text()} = {_fmt(s.value)} {s.unit}   ok")
        for a in self.answer:
            lines.append(f"answer: {a.name} = {_fmt(a.value)} {a.unit}")
        if self.ok:
            lines.append(f"VALID ({self.n_steps} steps)")
        else:
            d = self.first_failure
            assert d is not None
            where = f"step {d.step}" if d.step is not None else "trace"
            lines.append(f"REJECTED at {where} [{d.stage}/{d.code}]: {d.message}")
            for extra in self.diagnostics[1:]:
                lines.append(f"  also: {extra.feedback()}")
        return "\n".join(lines)


def verify(trace: Trace | dict[str, Any] | str, config: VerifierConfig = DEFAULT_CONFIG) -> Verdict:
    """V(J): verify a whole trace (object, JSON-like dict or JSON text). Never raises."""
    try:
        return _verify(trace, config)
    except RecursionError:
        return Verdict(False, (make_diagnostic(None, "malformed", "input nested too deeply"),))
    except Exception as exc:  # last line of defence: a verdict, never a traceback
        msg = f"internal error on this input: {type(exc).__name__}: {exc}"[:300]
        return Verdict(False, (make_diagnostic(None, "malformed", msg),))


def _verify(trace: Any, config: VerifierConfig) -> Verdict:
    parsed, shape_errors = parse_trace(trace)
    if parsed is None:
        diags = tuple(make_diagnostic(e.step, e.code if e.code in CODES else "malformed", f"{e.path}: {e.message}")
                      for e in shape_errors)
        return Verdict(False, diags)
    state, diags = VerifierState.from_givens(parsed.givens, config)
    givens = tuple(state.env.values())
    if diags:
        return Verdict(False, tuple(diags), givens=givens)
    if len(parsed.steps) > config.max_steps:
        too_long = make_diagnostic(None, "malformed", f"more than {config.max_steps} steps")
        return Verdict(False, (too_long,), givens=givens)
    results: list[StepResult] = []
    env = state.env
    for i, step in enumerate(parsed.steps):
        try:
            chk = _check_step(state, step, i, False)
        except Exception:
            chk = check_step(state, step, i, extend=False)  # re-run through the guarded path for the diagnostic
        if not chk.ok:
            assert chk.diagnostic is not None
            return Verdict(False, (chk.diagnostic,), tuple(results), (), i, givens)
        assert chk.result is not None
        results.append(chk.result)
        env[chk.result.name] = chk.result  # type: ignore[assignment]  # in place; a StepResult quacks like a Var
        state.n_steps += 1
    values, adiags = check_answer(state, parsed.answer)
    return Verdict(not adiags, tuple(adiags), tuple(results), tuple(values), len(results), givens)


def verify_incrementally(trace: Trace | dict[str, Any] | str, config: VerifierConfig = DEFAULT_CONFIG) -> Verdict:
    """V(J) computed through the incremental API (state + one step at a time); must equal `verify`."""
    parsed, shape_errors = parse_trace(trace)
    if parsed is None:
        return verify(trace, config)
    state, diags = VerifierState.from_givens(parsed.givens, config)
    givens = tuple(state.env.values())
    if diags:
        return Verdict(False, tuple(diags), givens=givens)
    if len(parsed.steps) > config.max_steps:
        return verify(parsed, config)
    results: list[StepResult] = []
    for step in parsed.steps:
        chk = verify_step(state, step)
        if not chk.ok:
            assert chk.diagnostic is not None
            return Verdict(False, (chk.diagnostic,), tuple(results), (), len(results), givens)
        assert chk.result is not None and chk.state is not None
        results.append(chk.result)
        state = chk.state
    values, adiags = check_answer(state, parsed.answer)
    return Verdict(not adiags, tuple(adiags), tuple(results), tuple(values), len(results), givens)
