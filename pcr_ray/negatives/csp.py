"""Counterfactual symbolic perturbation (CSP): verifier-passing hard negatives, and a type-blind random baseline.

From a verified gold trace J+ and a step index t, CSP makes negatives J- that still pass V(J) but are wrong:

- *principle swap*: the op at t becomes another registered primitive with the same output dimension, its
  arguments bound to variables (or the step's literals) of compatible dimension available before t;
- *variable substitution*: one argument at t is replaced by another available variable of the same dimension
  (a `const` name by another constant of the same dimension).

Steps after t are recomputed with the verifier's incremental API (claimed values dropped, then refilled), every
J- is checked with `verify`, and a J- whose value at t is within tolerance of J+'s is not a negative. Pairs are
deduplicated per step, and the random choices are seeded by (seed, trace key, t), so output never depends on
the order or sharding of the input. `random_negatives` is the conventional, type-blind generator for the
ablation; its negatives carry `verified` (does V accept them?).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pcr_ray.core.primitives import REGISTRY, Primitive
from pcr_ray.core.primitives.constants import CONSTANTS, constant_dims
from pcr_ray.core.primitives.registry import VARIADIC_MAX
from pcr_ray.core.trace import Step, Trace, parse_trace
from pcr_ray.core.units import DIMENSIONLESS, Dims, unit_info
from pcr_ray.core.verifier import StepResult, VerifierState, check_answer, check_step, verify

PRINCIPLE_SWAP = "principle_swap"
VARIABLE_SUBSTITUTION = "variable_substitution"
RANDOM_OP = "random_op"
RANDOM_ARG = "random_arg"
RANDOM_NOISE = "random_noise"
CSP_KINDS: tuple[str, ...] = (PRINCIPLE_SWAP, VARIABLE_SUBSTITUTION)
RANDOM_KINDS: tuple[str, ...] = (RANDOM_OP, RANDOM_ARG, RANDOM_NOISE)
ALL_KINDS: tuple[str, ...] = CSP_KINDS + RANDOM_KINDS


class CSPError(ValueError):
    """The input is not a verified gold trace (CSP needs one), or a bad argument."""


@dataclass(frozen=True, slots=True)
class CSPConfig:
    """Knobs of the counterfactual generator.

    rel_tol/abs_tol: J- must differ from J+ at step t by more than abs_tol + rel_tol * max(|v+|, |v-|)
    (compared in SI base units). max_per_kind: negatives per kind per step. max_bindings_per_op /
    max_tries_per_op bound the search for argument bindings of one candidate op.
    """

    rel_tol: float = 1e-3
    abs_tol: float = 1e-9
    max_per_kind: int = 2
    max_bindings_per_op: int = 4
    max_tries_per_op: int = 96
    kinds: tuple[str, ...] = CSP_KINDS
    seed: int = 0
    final_verify: bool = True

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in ALL_KINDS]
        if bad:
            raise CSPError(f"unknown perturbation kind(s) {bad}; known: {list(ALL_KINDS)}")
        if self.max_per_kind < 0 or self.rel_tol < 0 or self.abs_tol < 0:
            raise CSPError("max_per_kind, rel_tol and abs_tol must be non-negative")


@dataclass(frozen=True, slots=True)
class Negative:
    """One perturbed trace J- at step t, with the gold step it replaces.

    `positive`/`step` carry their values (verifier-recomputed for CSP; for random negatives the type-blind value
    or the noisy claim). `verified` tells whether V accepts J- (always True for CSP kinds).
    """

    kind: str
    t: int
    positive: Step
    step: Step
    trace: Trace
    pos_value: float
    neg_value: float | None
    verified: bool
    note: str

    def key(self) -> tuple[Any, ...]:
        return (self.t,) + step_key(self.step)


@dataclass(frozen=True, slots=True)
class GoldRun:
    """A verified gold trace with values filled in and the verifier state before each step."""

    trace: Trace  # steps carry their recomputed values
    states: tuple[VerifierState, ...]  # states[t]: givens + steps[:t]
    results: tuple[StepResult, ...]


def step_key(step: Step) -> tuple[Any, ...]:
    """A canonical identity of a step's computation (op and arguments; commutative arguments sorted)."""
    prim = REGISTRY.get(step.op)
    items = [(k, _arg_token(v)) for k, v in step.args.items()]
    if prim is not None and prim.commutative:
        vals = sorted(v for _, v in items)
        return (step.op, tuple(vals))
    return (step.op, tuple(sorted(items)))


def _arg_token(v: Any) -> str:
    return v if isinstance(v, str) else f"#{float(v)!r}"


def prepare_gold(trace: Trace | dict[str, Any] | str) -> GoldRun:
    """Verify a gold trace step by step (incremental API); raises CSPError when it does not verify."""
    if not isinstance(trace, Trace):
        parsed, errors = parse_trace(trace)
        if parsed is None:
            raise CSPError(f"not a trace: {errors[0].path}: {errors[0].message}" if errors else "not a trace")
        trace = parsed
    state, diags = VerifierState.from_givens(trace.givens)
    if diags:
        raise CSPError(f"gold trace rejected: {diags[0].feedback()}")
    states = [state]
    results: list[StepResult] = []
    steps: list[Step] = []
    for i, s in enumerate(trace.steps):
        chk = check_step(state, s, i)
        if not chk.ok:
            assert chk.diagnostic is not None
            raise CSPError(f"gold trace rejected: {chk.diagnostic.feedback()}")
        assert chk.result is not None and chk.state is not None
        results.append(chk.result)
        steps.append(replace(s, value=chk.result.value))
        state = chk.state
        states.append(state)
    _, adiags = check_answer(state, trace.answer)
    if adiags:
        raise CSPError(f"gold trace rejected: {adiags[0].feedback()}")
    return GoldRun(trace.with_steps(steps), tuple(states[:-1]), tuple(results))


# ---------------------------------------------------------------- pool of bindable values


@dataclass(frozen=True, slots=True)
class _Item:
    """A bindable argument: a variable name (str) or a dimensionless literal (float), with its dimension."""

    arg: str | float
    dims: Dims


def _pool(state: VerifierState, step: Step) -> list[_Item]:
    items = [_Item(v.name, v.dims) for v in state.env.values()]
    seen: set[float] = set()
    for a in step.args.values():
        if not isinstance(a, str) and float(a) not in seen:
            seen.add(float(a))
            items.append(_Item(float(a) if not float(a).is_integer() else int(a), DIMENSIONLESS))
    return items


def _dims_of_arg(state: VerifierState, a: Any) -> Dims | None:
    if isinstance(a, str):
        v = state.env.get(a)
        return v.dims if v is not None else None
    return DIMENSIONLESS


def _base_of_arg(state: VerifierState, a: Any) -> float:
    return state.env[a].base if isinstance(a, str) else float(a)


def _bindable(prim: Primitive) -> bool:
    return all(p.kind == "var" for p in prim.params)


def _differs(a: float, b: float, cfg: CSPConfig) -> bool:
    return abs(a - b) > cfg.abs_tol + cfg.rel_tol * max(abs(a), abs(b))


# ---------------------------------------------------------------- recompute J- after t


def _complete(gold: GoldRun, t: int, neg: Step, neg_result: StepResult, cfg: CSPConfig) -> Trace | None:
    """J- = prefix + neg + later steps recomputed (claimed values dropped, then refilled); None if V rejects."""
    steps = list(gold.trace.steps[:t]) + [replace(neg, value=neg_result.value)]
    state = gold.states[t].extend(neg_result)
    for i in range(t + 1, len(gold.trace.steps)):
        s = gold.trace.steps[i]
        chk = check_step(state, replace(s, value=None), i)
        if not chk.ok:
            return None
        assert chk.result is not None and chk.state is not None
        steps.append(replace(s, value=chk.result.value))
        state = chk.state
    _, adiags = check_answer(state, gold.trace.answer)
    if adiags:
        return None
    jm = gold.trace.with_steps(steps)
    if cfg.final_verify and not verify(jm).ok:
        return None
    return jm


def _accept(gold: GoldRun, t: int, neg: Step, kind: str, note: str, cfg: CSPConfig) -> Negative | None:
    """Verify the candidate at t against the prefix, check its value moved, recompute downstream."""
    state = gold.states[t]
    chk = check_step(state, replace(neg, value=None), t, extend=False)
    if not chk.ok:
        return None
    r = chk.result
    assert r is not None
    pos = gold.results[t]
    if not _differs(pos.base, r.base, cfg):
        return None
    jm = _complete(gold, t, neg, r, cfg)
    if jm is None:
        return None
    return Negative(kind, t, gold.trace.steps[t], jm.steps[t], jm, pos.value, r.value, True, note)


# ---------------------------------------------------------------- principle swap


def _candidate_lists(prim: Primitive, pool: list[_Item], out_dims: Dims, preferred: set[Any],
                     rng: random.Random, n_variadic: int) -> list[list[_Item]] | None:
    """Per-parameter candidates (preferred args first, the rest shuffled); None if some list is empty."""
    params = list(prim.params)
    if prim.variadic:
        params = [prim.params[0]] * n_variadic
    lists: list[list[_Item]] = []
    for p in params:
        if p.rkind == "exact":
            cands = [it for it in pool if it.dims == p.rdims]
        elif p.rkind == "dimless":
            cands = [it for it in pool if it.dims == DIMENSIONLESS]
        else:
            cands = list(pool)
        # an output that copies a parameter's dimension ('=x', or '=x1' for all of a variadic) pins it
        if prim.out_ref and (prim.out_ref == p.name or prim.variadic):
            cands = [it for it in cands if it.dims == out_dims]
        if not cands:
            return None
        first = [it for it in cands if it.arg in preferred]
        rest = [it for it in cands if it.arg not in preferred]
        rng.shuffle(first)
        rng.shuffle(rest)
        lists.append(first + rest)
    return lists


def _bindings(prim: Primitive, state: VerifierState, pool: list[_Item], out_dims: Dims, preferred: set[Any],
              rng: random.Random, n_variadic: int, cfg: CSPConfig) -> list[tuple[int, dict[str, Any]]]:
    """Up to cfg.max_bindings_per_op dimension-valid bindings as (overlap with the original args, args)."""
    if prim.out_dims is not None and prim.out_dims != out_dims:
        return []
    lists = _candidate_lists(prim, pool, out_dims, preferred, rng, n_variadic)
    if lists is None:
        return []
    names = [f"x{i + 1}" for i in range(n_variadic)] if prim.variadic else list(prim.param_names)
    found: list[tuple[int, dict[str, Any]]] = []
    for combo in itertools.islice(itertools.product(*lists), cfg.max_tries_per_op):
        args_ = [it.arg for it in combo]
        if len(set(map(_arg_token, args_))) < len(args_):
            continue  # x - x, x / x, ...: degenerate, not a plausible principle
        dims = {n: it.dims for n, it in zip(names, combo, strict=True)}
        try:
            if prim.variadic:
                if len(set(dims.values())) != 1:
                    continue
                if prim.params[0].rkind == "dimless" and combo[0].dims != DIMENSIONLESS:
                    continue
                od = prim.out_dims_for({"x1": combo[0].dims}, {})
            else:
                prim.check_args(dims)
                od = prim.out_dims_for(dims, {n: _base_of_arg(state, a) for n, a in zip(names, args_, strict=True)})
        except Exception:  # noqa: BLE001  (DimError, or a rule that needs a value: not a binding)
            continue
        if od != out_dims:
            continue
        overlap = sum(1 for a in args_ if a in preferred)
        found.append((overlap, dict(zip(names, args_, strict=True))))
        if len(found) >= cfg.max_bindings_per_op:
            break
    return found


def principle_swaps(gold: GoldRun, t: int, rng: random.Random, cfg: CSPConfig) -> list[Negative]:
    """Negatives at step t that apply another primitive with the same output dimension."""
    pos = gold.trace.steps[t]
    if pos.op == "const":
        return []
    state = gold.states[t]
    res = gold.results[t]
    out_dims = res.dims
    orig = REGISTRY[pos.op]
    pool = _pool(state, pos)
    preferred = set(pos.args.values())
    n_var = len(pos.args) if orig.variadic else 2
    candidates: list[tuple[tuple[int, int, float], str, dict[str, Any]]] = []
    for name in sorted(REGISTRY):
        prim = REGISTRY[name]
        if name == pos.op or not _bindable(prim):
            continue
        for overlap, args in _bindings(prim, state, pool, out_dims, preferred, rng, min(n_var, VARIADIC_MAX), cfg):
            same_family = int(prim.family == orig.family)
            candidates.append(((-overlap, -same_family, rng.random()), name, args))
    candidates.sort(key=lambda c: c[0])
    steps = ((Step(name, args, pos.out, None), f"{pos.op} -> {name}") for _, name, args in candidates)
    return accept_first(gold, t, steps, PRINCIPLE_SWAP, cfg)


# ---------------------------------------------------------------- variable substitution


def variable_substitutions(gold: GoldRun, t: int, rng: random.Random, cfg: CSPConfig) -> list[Negative]:
    """Negatives at step t with one argument replaced by another available value of the same dimension."""
    pos = gold.trace.steps[t]
    state = gold.states[t]
    prim = REGISTRY[pos.op]
    options: list[tuple[str, Any]] = []
    if pos.op == "const":
        name = pos.args.get("name")
        if isinstance(name, str) and name in CONSTANTS:
            d = constant_dims(name)
            options = [("name", c) for c in sorted(CONSTANTS) if c != name and constant_dims(c) == d]
    else:
        params = {p.name: p for p in prim.params}
        for pname, a in pos.args.items():
            p = params.get(pname, prim.params[0])
            if p.kind != "var":
                continue
            d = _dims_of_arg(state, a)
            if d is None:
                continue
            for v in state.env.values():
                if v.dims == d and v.name != a:
                    options.append((pname, v.name))
    rng.shuffle(options)
    return accept_first(gold, t, substituted(pos, options), VARIABLE_SUBSTITUTION, cfg)


def substituted(step: Step, options: Iterable[tuple[str, Any]]) -> Iterator[tuple[Step, str]]:
    """`step` with one argument replaced, per (argument name, replacement) option, and a note saying which;
    degenerate results (x - x, x / x: the same rule as for swaps) left out."""
    for pname, new in options:
        args = dict(step.args)
        old, args[pname] = args[pname], new
        if len(set(map(_arg_token, args.values()))) < len(args):
            continue
        yield Step(step.op, args, step.out, None), f"{pname}: {old} -> {new}"


def accept_first(gold: GoldRun, t: int, candidates: Iterable[tuple[Step, str]], kind: str,
                 cfg: CSPConfig) -> list[Negative]:
    """Up to cfg.max_per_kind negatives of `kind` at step t: the candidates (step, note) in order that `_accept`
    takes (verified, value moved, later steps recomputed), each computation once, never the gold step's own."""
    out: list[Negative] = []
    seen: set[tuple[Any, ...]] = {step_key(gold.trace.steps[t])}
    for neg, note in candidates:
        if len(out) >= cfg.max_per_kind:
            break
        k = step_key(neg)
        if k in seen:
            continue
        seen.add(k)
        n = _accept(gold, t, neg, kind, note, cfg)
        if n is not None:
            out.append(n)
    return out


# ---------------------------------------------------------------- entry points


def step_rng(seed: int, trace_key: str, t: int, kind: str) -> random.Random:
    """The seeded generator for one (trace, step, kind): independent of input order and sharding."""
    return random.Random(f"{seed}|{trace_key}|{t}|{kind}")


def counterfactuals(trace: Trace | GoldRun | dict[str, Any] | str, t: int | None = None, *, key: str = "",
                    config: CSPConfig | None = None) -> list[Negative]:
    """CSP negatives of a verified gold trace at step t (every step when t is None), deduplicated.

    `key` identifies the trace (e.g. the problem id) in the seed. Raises CSPError when the gold does not verify.
    """
    cfg = config or CSPConfig()
    gold = trace if isinstance(trace, GoldRun) else prepare_gold(trace)
    n = len(gold.trace.steps)
    ts: Iterable[int] = range(n) if t is None else [t]
    if t is not None and not 0 <= t < n:
        raise CSPError(f"step index {t} out of range for a trace of {n} steps")
    out: list[Negative] = []
    for i in ts:
        seen: set[tuple[Any, ...]] = set()
        for kind in cfg.kinds:
            if kind == PRINCIPLE_SWAP:
                negs = principle_swaps(gold, i, step_rng(cfg.seed, key, i, kind), cfg)
            elif kind == VARIABLE_SUBSTITUTION:
                negs = variable_substitutions(gold, i, step_rng(cfg.seed, key, i, kind), cfg)
            else:
                continue
            for neg in negs:
                if neg.key() not in seen:
                    seen.add(neg.key())
                    out.append(neg)
    return out


# ---------------------------------------------------------------- random (type-blind) perturbation


def _type_blind_value(state: VerifierState, step: Step) -> float | None:
    """What the op computes on the raw SI numbers, ignoring dimensions (None if it cannot)."""
    prim = REGISTRY.get(step.op)
    if prim is None or not _bindable(prim):
        return None
    try:
        kwargs = {k: _base_of_arg(state, a) for k, a in step.args.items()}
        base = float(prim.fn(**kwargs))
        info = unit_info(step.out.unit)
    except Exception:  # noqa: BLE001  (domain errors, unknown names: no value)
        return None
    if not math.isfinite(base):
        return None
    v = info.from_base(base)
    return v if math.isfinite(v) else None


def _random_record(gold: GoldRun, t: int, neg: Step, kind: str, note: str, cfg: CSPConfig) -> Negative | None:
    """J- of a random perturbation: prefix + neg (with its claimed value) + later steps recomputed when possible."""
    pos = gold.trace.steps[t]
    pos_res = gold.results[t]
    state = gold.states[t]
    chk = check_step(state, neg, t)
    steps = list(gold.trace.steps[:t]) + [neg]
    if chk.ok:
        assert chk.result is not None and chk.state is not None
        if not _differs(pos_res.base, chk.result.base, cfg):
            return None  # a random change that computes the same thing is no negative
        st: VerifierState | None = chk.state
    else:
        st = None
    for i in range(t + 1, len(gold.trace.steps)):
        s = replace(gold.trace.steps[i], value=None)
        if st is not None:
            c2 = check_step(st, s, i)
            if c2.ok:
                assert c2.result is not None
                s = replace(s, value=c2.result.value)
                st = c2.state
            else:
                st = None
        steps.append(s)
    jm = gold.trace.with_steps(steps)
    ok = verify(jm).ok
    return Negative(kind, t, pos, neg, jm, pos_res.value, neg.value, ok, note)


def random_negatives(trace: Trace | GoldRun | dict[str, Any] | str, t: int | None = None, *, key: str = "",
                     config: CSPConfig | None = None, per_kind: int = 1) -> list[Negative]:
    """Type-blind perturbations (random op, random argument, numeric noise on the claimed value).

    They are what a conventional PRM's negatives look like; many are rejected by the verifier (`verified`).
    """
    cfg = config or CSPConfig(kinds=RANDOM_KINDS)
    gold = trace if isinstance(trace, GoldRun) else prepare_gold(trace)
    n = len(gold.trace.steps)
    ts: Sequence[int] = range(n) if t is None else [t]
    ops = sorted(name for name, p in REGISTRY.items() if _bindable(p))
    out: list[Negative] = []
    for i in ts:
        pos = gold.trace.steps[i]
        state = gold.states[i]
        pool = _pool(state, pos)
        seen: set[tuple[Any, ...]] = {(i,) + step_key(pos)}
        kinds = [k for k in cfg.kinds if k in RANDOM_KINDS] or list(RANDOM_KINDS)
        for kind in kinds:
            rng = step_rng(cfg.seed, key, i, kind)
            made = 0
            for _attempt in range(8 * max(1, per_kind)):
                if made >= per_kind:
                    break
                neg, note = _random_step(kind, pos, state, pool, ops, rng)
                if neg is None:
                    continue
                k = (i,) + step_key(neg) + ((round(neg.value, 12),) if kind == RANDOM_NOISE and neg.value else ())
                if k in seen:
                    continue
                seen.add(k)
                rec = _random_record(gold, i, neg, kind, note, cfg)
                if rec is not None:
                    out.append(rec)
                    made += 1
    return out


def _random_step(kind: str, pos: Step, state: VerifierState, pool: list[_Item], ops: list[str],
                 rng: random.Random) -> tuple[Step | None, str]:
    if kind == RANDOM_NOISE:
        v = pos.value if pos.value is not None else 0.0
        factor = 1.0 + rng.choice((-1, 1)) * rng.uniform(0.1, 0.9)
        nv = v * factor if v != 0 else rng.uniform(0.5, 10.0)
        return replace(pos, value=float(f"{nv:.6g}")), f"value {v:.6g} -> {nv:.6g}"
    if kind == RANDOM_ARG:
        var_args = [k for k, a in pos.args.items() if isinstance(a, str) and a in state.env]
        if not var_args or len(state.env) < 2:
            return None, ""
        pname = rng.choice(sorted(var_args))
        choices = sorted(n for n in state.env if n != pos.args[pname])
        new = rng.choice(choices)
        args = dict(pos.args)
        args[pname] = new
        neg = Step(pos.op, args, pos.out, None)
        return replace(neg, value=_value_or(pos, _type_blind_value(state, neg))), f"{pname}: {pos.args[pname]} -> {new}"
    # RANDOM_OP: any op, arguments bound blindly
    name = rng.choice(ops)
    if name == pos.op:
        return None, ""
    prim = REGISTRY[name]
    names = ["x1", "x2"] if prim.variadic else list(prim.param_names)
    args = {n: rng.choice(pool).arg for n in names}
    neg = Step(name, args, pos.out, None)
    return replace(neg, value=_value_or(pos, _type_blind_value(state, neg))), f"{pos.op} -> {name}"


def _value_or(pos: Step, v: float | None) -> float | None:
    if v is None:
        return pos.value
    return float(f"{v:.6g}")
