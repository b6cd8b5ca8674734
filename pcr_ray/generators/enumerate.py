"""The symbolic enumerator: every (op, args) step over the variables at hand, as candidate JSON strings.

Typed mode applies each parameter's dimension constraint and the temperature reading/change rule
(pcr_ray.core.temperature) while enumerating, so every candidate is dimension-valid (an optimisation). Type-blind
mode tries every op over every argument combination and guesses the output unit, so that what separates
`nsprm` from `prm_only` is the verifier, not the generator. With `verifier_coverage` < 1 (the coverage ablation)
typed mode is typed only for the families whose unit rules that verifier coverage checks
(pcr_ray.core.verifier.covered_families) and type-blind for the others: the enumerator knows the rules the
verifier knows, and does not re-impose the ones the ablation switches off.
Rules shared by both modes, so that the output is deterministic:
- ops in name order; variadic ops in their two-argument form, plus one binding x1..xN of all the variables of
  each admissible dimension when there are 3 to 8 (three resistors in series in one step); ops with expression
  parameters are skipped;
- a variable is never paired with itself, except in `mul` (a square) and in a formula of 4+ parameters where it
  is the only candidate of a parameter (one specific heat for both c1 and c2 of `mixing_temperature`);
- commutative ops take their arguments in one order only;
- `const` names are offered when the constant fills an exact-dimension parameter of some op whose other
  exact parameters are at hand (even when a variable of its dimension is given: g beside a braking
  acceleration), or when a hint word of the constant is in the text (counting constants; g; h, whose photon
  formulas also take c, so that neither is at hand before the other is loaded);
- dimensionless parameters may also take the configured literals;
- candidates by the number of variables not used yet plus the op's exact-dimension parameters (domain formulas
  before generic arithmetic), then
  fewer literals, constant loads last; beyond `cap`, constant loads are all kept (few, and a prerequisite of the
  formulas that need them) after a head of `head_share` of the remaining cap in that order, at most
  `head_per_op` per op before the rest of the head, and the rest is a seeded sample (seed from the request
  seed, problem id and step number);
- answer declarations come first: {"answer": [{name, unit}]} for each step output (not a bare constant load)
  that has the target's dimension and temperature role (typed; any output when blind) and whose computation
  covers every nonzero given (`answer_coverage='all'`), or every step output (`'any'`).
Full mode (best-of-N) samples seeded rollouts from these candidates until an answer declaration is possible.
"""

from __future__ import annotations

import json
import random
import re
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from pcr_ray.configs import EnumerateGeneratorConfig
from pcr_ray.core.counts import (
    CHECKED_FAMILY,
    PHYSICAL_FAMILIES,
    UNION_OPS,
    count_error,
    kinds_or_none,
    kinds_unit,
    out_kinds,
)
from pcr_ray.core.naming import fresh_name
from pcr_ray.core.primitives import REGISTRY, DimError, Primitive
from pcr_ray.core.primitives.constants import CONSTANTS, constant_dims
from pcr_ray.core.primitives.registry import ANY, DIMLESS, EXACT, SAME, VARIADIC_MAX
from pcr_ray.core.temperature import answer_role_error, checks_op, step_role
from pcr_ray.core.trace import Out, Step
from pcr_ray.core.units import DIMENSIONLESS, Dims, canonical_unit, try_unit_info
from pcr_ray.core.verifier import covered_families
from pcr_ray.generators.base import GENERATORS, GeneratorStats, ProposalRequest
from pcr_ray.generators.schema import VarInfo, has_expr_param, visible_vars

# json.dumps with options builds an encoder per call; the enumerator encodes millions of small objects
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_SORTED = json.JSONEncoder(sort_keys=True).encode

DEFAULTS = EnumerateGeneratorConfig  # the defaults of every option: the schema of its kind states them

# Words in the problem text that make a dimensionless counting constant worth offering.
CONST_HINTS: dict[str, str] = {
    "pi": r"circle|radius|diameter|circumference|sphere|cylinder|angular|rpm|revolution|orbit",
    "minutes_per_hour": r"\bminutes?\b.*\bhours?\b|\bhours?\b.*\bminutes?\b",
    "hours_per_day": r"\bhours?\b.*\bdays?\b|\bdays?\b.*\bhours?\b",
    "days_per_week": r"\bdays?\b.*\bweeks?\b|\bweeks?\b.*\bdays?\b",
    "months_per_year": r"\bmonths?\b.*\byears?\b|\byears?\b.*\bmonths?\b",
    "weeks_per_year": r"\bweeks?\b.*\byears?\b|\byears?\b.*\bweeks?\b",
    "dozen": r"\bdozens?\b",
    "g": r"gravit|\bfall|\bdrop|\bheight|\bweight|\bthrown|\bprojectile|\bincline|\bpendulum|\bfree",
    # photon formulas take two constants (h and c): neither is at hand before the other is loaded
    "h": r"\bphotons?\b|\bplanck|\bquantum",
}


@dataclass(frozen=True)
class _Cand:
    """An enumerated candidate before serialisation; `priority` sorts (lower first)."""

    priority: tuple[Any, ...]
    obj: dict[str, Any]


@GENERATORS.register("enumerate", "enumerator")
@dataclass
class EnumeratorGenerator:
    """Enumerates candidate steps and answer declarations; see the module docstring for the rules."""

    typed: bool = DEFAULTS.typed
    cap: int = DEFAULTS.cap
    seed: int = DEFAULTS.seed
    literals: tuple[float, ...] = ()
    families: tuple[str, ...] | None = DEFAULTS.families
    ops: tuple[str, ...] | None = DEFAULTS.ops
    answer_coverage: str = DEFAULTS.answer_coverage
    out_units: str = DEFAULTS.out_units
    rollout_max_steps: int = DEFAULTS.rollout_max_steps
    max_per_op: int = DEFAULTS.max_per_op
    head_per_op: int = DEFAULTS.head_per_op
    head_share: float = DEFAULTS.head_share
    verifier_coverage: float = DEFAULTS.verifier_coverage
    uses_feedback: bool = False  # deterministic: a retry with feedback would return the same candidates
    model_free: ClassVar[bool] = True  # no model: built inside each search worker under placement auto
    async_engine: ClassVar[bool] = False
    stats: GeneratorStats = field(default_factory=GeneratorStats)

    def __post_init__(self) -> None:
        if self.answer_coverage not in ("all", "any"):
            raise ValueError(f"answer_coverage must be 'all' or 'any', got {self.answer_coverage!r}")
        if self.out_units not in ("canonical", "operands"):
            raise ValueError(f"out_units must be 'canonical' (SI) or 'operands' (an argument's unit), "
                             f"got {self.out_units!r}")
        if self.cap < 1:
            raise ValueError("cap must be >= 1")
        if not 0.0 <= self.head_share <= 1.0:
            raise ValueError(f"head_share must be in [0, 1] (the share of the cap taken in priority order), "
                             f"got {self.head_share}")
        if not 0.0 <= self.verifier_coverage <= 1.0:
            raise ValueError(f"verifier_coverage must be in [0, 1], got {self.verifier_coverage}")
        self.literals = tuple(float(x) for x in self.literals)
        names = sorted(REGISTRY) if self.ops is None else [o for o in self.ops if o in REGISTRY]
        if self.families is not None:
            fams = set(self.families)
            names = [n for n in names if REGISTRY[n].family in fams or n == "const"]
        self._prims: list[Primitive] = [REGISTRY[n] for n in names if not has_expr_param(REGISTRY[n])]
        covered = covered_families(self.verifier_coverage)
        self._typed_ops: frozenset[str] = frozenset(
            p.name for p in self._prims if self.typed and p.family in covered)
        # the dimensions of each formula's exact-dimension parameters, for formulas with two or more of them
        exact = [tuple(p.rdims for p in prim.params if p.kind == "var" and p.rkind == EXACT) for prim in self._prims]
        self._exact_param_dims: list[tuple[Dims, ...]] = [ds for ds in exact if len(ds) >= 2]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> EnumeratorGenerator:
        """From a config mapping (unknown keys are an error, so typos do not pass silently)."""
        known = {f.name for f in fields(cls) if f.init} - {"uses_feedback", "stats"}  # its settings
        extra = set(cfg) - known - {"kind", "name", "description"}
        if extra:
            raise ValueError(f"unknown enumerator option(s) {sorted(extra)}; known: {sorted(known)}")
        kw = {k: cfg[k] for k in known if k in cfg and cfg[k] is not None}
        for key in ("literals", "families", "ops"):
            if key in kw:
                kw[key] = tuple(kw[key])
        return cls(**kw)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "enumerate", "typed": self.typed, "cap": self.cap, "seed": self.seed,
                "literals": list(self.literals), "n_ops": len(self._prims),
                "verifier_coverage": self.verifier_coverage}

    # ------------------------------------------------------------------ protocol

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """Candidates per request (k is ignored in step mode: the cap bounds the output)."""
        t0 = time.perf_counter()
        out: list[list[str]] = []
        for req in requests:
            if req.mode == "step":
                out.append(self.step_candidates(req))
            elif req.mode == "full":
                out.append(self.rollouts(req))
            else:
                raise ValueError(f"the enumerator proposes steps and whole traces, not mode {req.mode!r} "
                                 f"(use an LLM generator for the direct / python baselines)")
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.candidates += sum(len(c) for c in out)
        self.stats.seconds += time.perf_counter() - t0
        return out

    # ------------------------------------------------------------------ step mode

    def step_candidates(self, req: ProposalRequest) -> list[str]:
        """All candidates for the next step of `req`, as JSON strings (answers first)."""
        answers, steps = self._enumerate(req)
        rng = random.Random(zlib.crc32(f"{self.seed}|{req.seed}|{req.problem_id}|{len(req.steps)}".encode()))
        steps = self._apply_cap(steps, rng)
        return [_COMPACT(c) for c in answers] + [_COMPACT(c.obj) for c in steps]

    def _apply_cap(self, cands: list[_Cand], rng: random.Random) -> list[_Cand]:
        cands.sort(key=lambda c: c.priority)
        if len(cands) <= self.cap:
            return cands
        loads = [c for c in cands if c.obj["op"] == "const"]  # kept whatever the cap, after the head
        cands = [c for c in cands if c.obj["op"] != "const"]
        cap = max(self.cap - len(loads), 2)
        head = int(cap * self.head_share)
        if self.head_per_op > 0:  # spread the head over ops: one op's many bindings cannot fill it
            per_op: dict[str, int] = {}
            first: list[int] = []
            for i, c in enumerate(cands):
                op = c.obj["op"]
                if per_op.get(op, 0) < self.head_per_op:
                    per_op[op] = per_op.get(op, 0) + 1
                    first.append(i)
                    if len(first) == head:
                        break
            chosen = set(first)
            first += [i for i in range(len(cands)) if i not in chosen][: head - len(first)]
            chosen = set(first)
            cands = [cands[i] for i in sorted(first)] + [c for i, c in enumerate(cands) if i not in chosen]
        rest = cands[head:]
        picked = sorted(rng.sample(range(len(rest)), min(len(rest), cap - head)))
        return cands[:head] + loads + [rest[i] for i in picked]

    def _enumerate(self, req: ProposalRequest) -> tuple[list[dict[str, Any]], list[_Cand]]:
        variables = visible_vars(req.givens, req.steps)
        used = {a for s in req.steps for a in s.args.values() if isinstance(a, str)}
        target = try_unit_info(req.target_unit) if req.target_unit else None
        answers = self._answers(req, variables, target.dims if target else None)
        taken = {v.name for v in variables}
        index = len(req.steps)
        defined_consts = {s.args.get("name") for s in req.steps if s.op == "const"}
        cands: list[_Cand] = []
        seen: set[str] = set()
        n_exact = {p.name: sum(1 for q in p.params if q.kind == "var" and q.rkind == EXACT) for p in self._prims}
        roles = {v.name: v.temp for v in variables}
        role_of = roles.get
        base = {v.name: _base_value(v) for v in variables}  # each variable's value in SI, once per request
        asked = kinds_or_none(req.target_unit) if req.target_unit else None
        covering = asked if asked and len(asked) == 1 and asked[0][1] == 1 else None  # boys + girls as children
        in_scope = _units_in_scope(variables) if self.out_units == "operands" else None
        for order, prim in enumerate(self._prims):
            if prim.name == "const":
                for cname in self._useful_consts(req, variables, defined_consts):
                    d = constant_dims(cname)  # parses: _useful_consts checked
                    obj = self._step_obj("const", {"name": cname}, d, index, taken, target, in_scope=in_scope)
                    # few candidates, and a prerequisite of the formulas that need them: never capped away
                    cands.append(_Cand((0, 0, order, cname), obj))
                continue
            typed = prim.name in self._typed_ops
            for n_bound, binding in enumerate(self._bindings(prim, variables, typed, covering)):
                if n_bound >= self.max_per_op:
                    break
                args = {p: (b.name if isinstance(b, VarInfo) else b) for p, b in binding.items()}
                key = prim.name + _SORTED(args)
                if key in seen:
                    continue
                seen.add(key)
                dims = self._out_dims(prim, binding, base)
                if dims is None and typed:
                    continue
                if typed and checks_op(prim.name) and step_role(prim.name, args, role_of)[1]:
                    continue  # a temperature reading where a change belongs, or the reverse
                n_unused = sum(1 for b in binding.values() if isinstance(b, VarInfo) and b.name not in used)
                n_lit = sum(1 for b in binding.values() if not isinstance(b, VarInfo))
                obj = self._step_obj(prim.name, args, dims, index, taken, target, binding, in_scope)
                cands.append(_Cand((-n_unused - n_exact[prim.name], n_lit, order, key), obj))
        return answers, cands

    def _step_obj(self, op: str, args: dict[str, Any], dims: Dims | None, index: int, taken: set[str],
                  target: Any, binding: Mapping[str, Any] | None = None,
                  in_scope: Mapping[Dims, str] | None = None) -> dict[str, Any]:
        if dims is None:  # type-blind guess: the unit of the first variable argument
            first = next((b for b in (binding or {}).values() if isinstance(b, VarInfo)), None)
            unit = first.unit if first is not None else "dimensionless"
        else:
            counted = self._counted_unit(op, dims, binding, target) if binding else None
            if counted is not None:
                unit = counted  # what the step counts (280 orange; the asked kind where a sum covers two)
            elif target is not None and dims == target.dims:
                unit = target.text
            elif in_scope is not None and (own := _operand_unit(dims, binding, in_scope)) is not None:
                unit = own  # out_units=operands: 5015 lb where canonical says 2275 kg
            else:
                unit = canonical_unit(dims)
        return {"op": op, "args": args, "out": {"name": fresh_name(dims, index, taken), "unit": unit}}

    @staticmethod
    def _counted_unit(op: str, dims: Dims, binding: Mapping[str, Any], target: Any) -> str | None:
        """The output unit of an arithmetic step that counts something (pcr_ray.core.counts): the asked unit when
        the step may declare it (280 orange for 'how many oranges'; boys + girls as children), else the unit of
        what the op's rule says it counts; None when nothing is counted."""
        prim = REGISTRY[op]
        if prim.family != CHECKED_FAMILY:
            return None
        units = {p: (b.unit if isinstance(b, VarInfo) else None) for p, b in binding.items()}
        if target is not None and dims == target.dims and kinds_or_none(target.text) \
                and count_error(prim, units, target.text) is None:
            return target.text
        kinds = out_kinds(prim, units)
        return kinds_unit(dims, kinds) if kinds else None

    def _out_dims(self, prim: Primitive, binding: Mapping[str, Any],
                  base: Mapping[str, float | None]) -> Dims | None:
        arg_dims: dict[str, Dims] = {}
        values: dict[str, Any] = {}
        for p, b in binding.items():
            if isinstance(b, VarInfo):
                if b.dims is None:
                    return None
                arg_dims[p] = b.dims
                values[p] = base[b.name]
            else:
                arg_dims[p] = DIMENSIONLESS
                values[p] = b
        try:
            if not prim.variadic:
                prim.check_args(arg_dims)
            return prim.out_dims_for(arg_dims if not prim.variadic else {"x1": arg_dims["x1"]}, values)
        except (DimError, KeyError, TypeError):
            return None
        except Exception:  # an output rule that needs a value we do not have
            return None

    def _options(self, prim: Primitive, p: Any, variables: list[VarInfo], bound: Mapping[str, Any],
                 typed: bool, covering: Any = None) -> list[Any]:
        lits: list[Any] = list(self.literals)
        if not typed:
            return list(variables) + lits
        if prim.family in PHYSICAL_FAMILIES:  # a physical formula takes no counted thing (pcr_ray.core.counts)
            variables = [v for v in variables if not kinds_or_none(v.unit)]
        elif prim.family != CHECKED_FAMILY:  # the counted arguments of any other op count one thing
            held = next((k for b in bound.values() if isinstance(b, VarInfo) and (k := kinds_or_none(b.unit))), None)
            if held:
                variables = [v for v in variables if not (k := kinds_or_none(v.unit)) or k == held]
        if p.rkind == EXACT:
            return [v for v in variables if v.dims == p.rdims]
        if p.rkind == DIMLESS:  # a plain factor counts nothing: 35 orange/sack is dimensionless, and no factor
            return [v for v in variables if v.dims == DIMENSIONLESS and not kinds_or_none(v.unit)] + lits
        if p.rkind == SAME:
            ref = bound.get(p.rref)
            ref_dims = ref.dims if isinstance(ref, VarInfo) else DIMENSIONLESS
            ref_kinds = kinds_or_none(ref.unit) if isinstance(ref, VarInfo) else ()
            # two different kinds only in a sum the question's kind covers (boys + girls, asked for children)
            union = covering if prim.name in UNION_OPS and ref_kinds and len(ref_kinds) == 1 \
                and ref_kinds != covering else None
            return [v for v in variables if v.dims == ref_dims and _like_counts(kinds_or_none(v.unit), ref_kinds, union)
                    ] + (lits if ref_dims == DIMENSIONLESS and not ref_kinds else [])
        if p.rkind == ANY:
            return list(variables) + lits
        return []

    def _bindings(self, prim: Primitive, variables: list[VarInfo], typed: bool, covering: Any = None):
        params = list(prim.params)  # variadic ops register x1, x2: their two-argument form
        if any(p.kind != "var" for p in params):
            return
        # SAME parameters refer to earlier ones in every registered op; order params so refs come first.
        order = sorted(range(len(params)), key=lambda i: 1 if params[i].rkind == SAME else 0)

        names: dict[str, int] = {}  # the variables bound so far, by name (a variable may fill two parameters)
        reuse = prim.name == "mul"

        def rec(j: int, bound: dict[str, Any]):
            if j == len(order):
                yield dict(bound)
                return
            p = params[order[j]]
            options = self._options(prim, p, variables, bound, typed, covering)
            for opt in options:
                is_var = isinstance(opt, VarInfo)
                # one variable in two parameters only for mul (squares) and for a formula of 4+ parameters whose
                # parameter has no other candidate (mixing_temperature: one specific heat fills c1 and c2)
                if is_var and not reuse and names.get(opt.name) and not (len(options) == 1 and len(params) >= 4):
                    continue
                bound[p.name] = opt
                if is_var:
                    names[opt.name] = names.get(opt.name, 0) + 1
                yield from rec(j + 1, bound)
                if is_var:
                    names[opt.name] -= 1
                del bound[p.name]

        seen_comm: set[tuple[str, ...]] = set()
        for b in rec(0, {}):
            if prim.commutative:
                key = tuple(sorted(repr(x.name if isinstance(x, VarInfo) else x) for x in b.values()))
                if key in seen_comm:
                    continue
                seen_comm.add(key)
            yield {p.name: b[p.name] for p in params}
        if prim.variadic:  # beyond the two-argument forms: every variable of one dimension at once
            yield from self._all_of_a_dimension(prim, variables)

    def _all_of_a_dimension(self, prim: Primitive, variables: list[VarInfo]):
        """For a variadic op, one binding x1..xN of all the variables of each admissible dimension (3 <= N <= 8)."""
        first = prim.params[0]
        wanted = {EXACT: first.rdims, DIMLESS: DIMENSIONLESS}.get(first.rkind)  # None: any one dimension
        groups: dict[Dims, list[VarInfo]] = {}
        for v in variables:
            if v.dims is not None and (wanted is None or v.dims == wanted):
                groups.setdefault(v.dims, []).append(v)
        for vs in groups.values():
            if 3 <= len(vs) <= VARIADIC_MAX:
                yield {f"x{i + 1}": v for i, v in enumerate(vs)}

    def _useful_consts(self, req: ProposalRequest, variables: list[VarInfo], defined: set[Any]) -> list[str]:
        text = req.problem_text.lower()
        dims_at_hand = {v.dims for v in variables if v.dims is not None}
        out = []
        for cname in CONSTANTS:
            if cname in defined:
                continue
            info = try_unit_info(CONSTANTS[cname][1])
            if info is None:  # a constant whose unit string does not parse cannot be used anyway
                continue
            d = info.dims
            hint = CONST_HINTS.get(cname)
            if hint and re.search(hint, text, flags=re.IGNORECASE | re.DOTALL):
                out.append(cname)
                continue
            if d == DIMENSIONLESS:
                continue
            if self._fills_exact_param(d, dims_at_hand):
                out.append(cname)
        return out

    def _fills_exact_param(self, d: Dims, dims_at_hand: set[Dims]) -> bool:
        """Whether a quantity of dimension `d` fills an exact parameter of a formula of 2+ exact parameters whose
        other exact parameters are at hand."""
        return any(d in ds and all(x == d or x in dims_at_hand for x in ds) for ds in self._exact_param_dims)

    def _answers(self, req: ProposalRequest, variables: list[VarInfo], target: Dims | None) -> list[dict]:
        steps = req.steps
        if not steps:
            return []
        deps: dict[str, set[str]] = {g.name: {g.name} for g in req.givens}
        for s in steps:
            acc: set[str] = set()
            for a in s.args.values():
                if isinstance(a, str):
                    acc |= deps.get(a, set())
            deps[s.out.name] = acc
        needed = {g.name for g in req.givens if g.value != 0}
        loaded = {s.out.name for s in steps if s.op == "const"}  # a bare constant is not what a problem asks
        outs = [v for v in variables if not v.is_given and v.name not in loaded]
        if target is None:
            outs = outs[-1:]
        res = []
        for v in reversed(outs):  # latest first
            if self.typed and target is not None and v.dims != target:
                continue
            if self.answer_coverage == "all" and not needed <= deps.get(v.name, set()):
                continue
            if self.typed and req.target_unit and answer_role_error(v.temp, req.target_unit):
                continue  # a temperature change asked as a reading (or the reverse): the verifier rejects it
            if self.typed and req.target_unit and _counts_other(v.unit, req.target_unit):
                continue  # a count of sacks where oranges are asked: the verifier rejects it
            res.append({"answer": [{"name": v.name, "unit": req.target_unit or v.unit}]})
        return res

    # ------------------------------------------------------------------ full mode (best-of-N)

    def rollouts(self, req: ProposalRequest) -> list[str]:
        """`req.k` seeded rollouts: at each step pick among the top-priority candidates, stop at an answer."""
        out: list[str] = []
        for i in range(req.k):
            rng = random.Random(zlib.crc32(f"{self.seed}|{req.seed}|{req.problem_id}|rollout{i}".encode()))
            steps: list[Step] = list(req.steps)
            answer = None
            for _ in range(self.rollout_max_steps):
                sub = ProposalRequest(req.problem_id, req.problem_text, req.givens, tuple(steps),
                                      target_unit=req.target_unit)
                answers, cands = self._enumerate(sub)
                if answers:
                    answer = answers[0]["answer"]
                    break
                if not cands:
                    break
                cands.sort(key=lambda c: c.priority)
                best = cands[0].priority[:3]
                tier = [c for c in cands if c.priority[:3] == best]
                obj = rng.choice(tier).obj
                steps.append(Step(obj["op"], obj["args"], Out(obj["out"]["name"], obj["out"]["unit"])))
            trace = {"steps": [s.to_dict() for s in steps[len(req.steps):]], "answer": answer or []}
            out.append(json.dumps(trace, separators=(",", ":")))
        return out


def _like_counts(kinds: Any, ref: Any, covering: Any) -> bool:
    """Whether an argument's kinds may stand beside the reference's: the same, unknown, or (in a sum declared as
    the covering kind) another single kind."""
    return kinds is None or ref is None or kinds == ref or (
        covering is not None and len(kinds) == 1 and kinds[0][1] == 1 and kinds != covering)


def _plain_unit(v: VarInfo) -> bool:
    """Whether a variable's unit is a physical one: not what a count counts, not dimensionless."""
    return v.dims != DIMENSIONLESS and not kinds_or_none(v.unit)


def _units_in_scope(variables: Sequence[VarInfo]) -> dict[Dims, str]:
    """The first physical unit of each dimension among the variables in scope (givens first)."""
    out: dict[Dims, str] = {}
    for v in variables:
        if v.dims is not None and _plain_unit(v):
            out.setdefault(v.dims, v.unit)
    return out


def _operand_unit(dims: Dims, binding: Mapping[str, Any] | None, in_scope: Mapping[Dims, str]) -> str | None:
    """out_units=operands: the unit of the first argument of the output's dimension, else of a variable in scope."""
    for b in (binding or {}).values():
        if isinstance(b, VarInfo) and b.dims == dims and _plain_unit(b):
            return b.unit
    return in_scope.get(dims)


def _counts_other(unit: str, asked: str) -> bool:
    """Whether a unit and the asked unit both count known things, and different ones."""
    mine, want = kinds_or_none(unit), kinds_or_none(asked)
    return mine is not None and want is not None and mine != want


def count_candidates(req: ProposalRequest, **kw: Any) -> int:
    """How many step candidates the enumerator makes for a request before the cap (for reports)."""
    gen = EnumeratorGenerator(cap=10**9, **kw)
    return len(gen.step_candidates(req))


def _base_value(v: VarInfo) -> float | None:
    """A variable's value in SI base units, or None when its value or unit is unknown."""
    u = try_unit_info(v.unit)
    return u.to_base(v.value) if (u is not None and v.value is not None) else None
