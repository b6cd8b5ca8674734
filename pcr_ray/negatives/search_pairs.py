"""Search-matched hard negatives: what the PRM must rank at search time, made from verified gold traces.

CSP (pcr_ray.negatives.csp) perturbs the gold step itself. At search time the PRM also ranks every *other* valid
continuation the generator offers, and decides when to stop (answer declarations are scored like steps).
Three more verifier-passing pair kinds teach exactly that:

- `alternative_step`: at gold prefix t, another dimension-valid step the symbolic enumerator proposes there
  (any op, any output dimension), accepted by the verifier, whose value or dimension differs from the gold
  step's (the rendering names both canonically, so names carry no signal);
- `answer_timing`: stopping too early vs going on. Before the last step, the positive is the next gold step
  and the negative declares an earlier output of the answer's dimension as the answer; after the last step,
  the positive is the gold answer and the negative is another valid step;
- `unused_constant`: at gold prefix t, the gold step against loading a physical constant the gold trace never
  uses (one the enumerator offers there because it fills a formula's parameter: the speed of light for a car's
  distance); a load is always valid, so only the PRM can tell that the problem has no use for it.

Pure Python and seeded by (seed, key, t, kind), like CSP; rows come back as `SearchNegative`s.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pcr_ray.core.render import canonical_names, render_answer, render_candidate
from pcr_ray.core.trace import Answer, Out, Step
from pcr_ray.core.verifier import VerifierState, check_answer, check_step
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.enumerate import EnumeratorGenerator
from pcr_ray.negatives.csp import GoldRun, step_key, step_rng

ALTERNATIVE_STEP = "alternative_step"
ANSWER_TIMING = "answer_timing"
UNUSED_CONSTANT = "unused_constant"
SEARCH_KINDS: tuple[str, ...] = (ALTERNATIVE_STEP, ANSWER_TIMING, UNUSED_CONSTANT)


@dataclass(frozen=True, slots=True)
class SearchNegative:
    """One pair at prefix t: the rendered positive and negative (step or answer) with their JSON and values."""

    kind: str
    t: int
    pos_text: str
    pos_json: str
    neg_text: str
    neg_json: str
    pos_value: float
    neg_value: float
    note: str


def _json(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _differs(a: float, b: float, rel_tol: float, abs_tol: float = 1e-9) -> bool:
    return abs(a - b) > abs_tol + rel_tol * max(abs(a), abs(b))


def alternatives(gold: GoldRun, state: VerifierState, t: int, name: str | None, text: str, target_unit: str,
                 rng: random.Random, n: int, rel_tol: float, cap: int = 64,
                 enumerator: Mapping[str, Any] | None = None) -> list[tuple[Step, float]]:
    """Up to n verified enumerated steps at prefix t that differ from gold step t (if any), named `name`
    (None: the enumerator's own name); `enumerator`: EnumeratorGenerator options (ops, out_units)."""
    req = ProposalRequest(problem_id="pairs", problem_text=text, givens=gold.trace.givens,
                          steps=gold.trace.steps[:t], target_unit=target_unit, seed=rng.randrange(1 << 30))
    opts = dict(enumerator or {})
    if opts.get("ops"):
        opts["ops"] = tuple(opts["ops"])
    gen = EnumeratorGenerator(cap=cap, seed=0, max_per_op=256, **opts)
    pos = gold.trace.steps[t] if t < len(gold.trace.steps) else None
    pos_res = gold.results[t] if pos is not None else None
    out: list[tuple[Step, float]] = []
    seen: set[tuple[object, ...]] = set()
    raws = gen.step_candidates(req)
    rng.shuffle(raws)
    for raw in raws:
        obj = json.loads(raw)
        if "op" not in obj:
            continue
        step = Step(obj["op"], obj["args"], Out(name or obj["out"]["name"], obj["out"]["unit"]))
        key = step_key(step)
        if key in seen or (pos is not None and key == step_key(pos)):
            continue
        seen.add(key)
        chk = check_step(state, step, t, extend=False)
        if not chk.ok or chk.result is None:
            continue
        res = chk.result
        if pos_res is not None and res.dims == pos_res.dims and not _differs(res.base, pos_res.base, rel_tol):
            continue  # the same quantity by another route: not a negative
        out.append((Step(step.op, step.args, step.out, res.value), res.value))
        if len(out) >= n:
            break
    return out


def search_negatives(gold: GoldRun, text: str, *, key: str, kinds: Sequence[str] = SEARCH_KINDS,
                     per_kind: int = 2, seed: int = 0, rel_tol: float = 1e-3,
                     enumerator: Mapping[str, Any] | None = None) -> list[SearchNegative]:
    """`alternative_step`, `answer_timing` and `unused_constant` pairs of one verified gold trace (see the module
    docstring).

    `enumerator` sets the options the alternatives are enumerated with (e.g. GSM8K's arithmetic ops, its steps
    in their operands' units, as the search makes them there)."""
    steps = gold.trace.steps
    n = len(steps)
    answer = gold.trace.answer
    out: list[SearchNegative] = []
    if not steps or not answer:
        return out
    target_unit = answer[0].unit
    final_state = check_step(gold.states[-1], steps[-1], n - 1).state
    assert final_state is not None  # a GoldRun verifies
    ans_values, diags = check_answer(final_state, answer)
    if diags:
        return out
    target_dims = ans_values[0].dims
    givens = gold.trace.givens
    used_consts = {s.args.get("name") for s in steps if s.op == "const"}
    for t in range(n + 1):
        prefix = steps[:t]
        state = gold.states[t] if t < n else final_state
        if ALTERNATIVE_STEP in kinds and t < n:
            rng = step_rng(seed, key, t, ALTERNATIVE_STEP)
            pos = steps[t]
            for alt, v in alternatives(gold, state, t, pos.out.name, text, target_unit, rng, per_kind, rel_tol,
                                       enumerator=enumerator):
                out.append(SearchNegative(ALTERNATIVE_STEP, t, render_candidate(givens, prefix, pos),
                                          _json(pos.to_dict()), render_candidate(givens, prefix, alt),
                                          _json(alt.to_dict()), float(pos.value or 0.0), v,
                                          f"{pos.op} -> {alt.op}"))
        if UNUSED_CONSTANT in kinds and t < n:
            rng = step_rng(seed, key, t, UNUSED_CONSTANT)
            pos = steps[t]
            loads = [(alt, v) for alt, v in alternatives(gold, state, t, pos.out.name, text, target_unit, rng, 1 << 16,
                                                         rel_tol, enumerator=enumerator)
                     if alt.op == "const" and alt.args.get("name") not in used_consts]
            for alt, v in loads[:per_kind]:
                out.append(SearchNegative(UNUSED_CONSTANT, t, render_candidate(givens, prefix, pos),
                                          _json(pos.to_dict()), render_candidate(givens, prefix, alt),
                                          _json(alt.to_dict()), float(pos.value or 0.0), v,
                                          f"{pos.op} -> const {alt.args.get('name')}"))
        if ANSWER_TIMING not in kinds:
            continue
        rng = step_rng(seed, key, t, ANSWER_TIMING)
        if t < n:  # too early: declare an earlier output of the answer's dimension instead of going on
            pos = steps[t]
            early = [r for r in gold.results[:t] if r.dims == target_dims][::-1][:per_kind]
            for r in early:
                decl = (Answer(r.name, target_unit),)
                vals, d = check_answer(state, decl)
                if d:
                    continue
                out.append(SearchNegative(ANSWER_TIMING, t, render_candidate(givens, prefix, pos),
                                          _json(pos.to_dict()),
                                          render_answer(decl, [v.value for v in vals], canonical_names(givens, prefix)),
                                          _json({"answer": [a.to_dict() for a in decl]}),
                                          float(pos.value or 0.0), float(vals[0].value), f"early answer {r.name}"))
        else:  # done: answering beats going on
            pos_text = render_answer(answer, [v.value for v in ans_values], canonical_names(givens, steps))
            pos_json = _json({"answer": [a.to_dict() for a in answer]})
            for alt, v in alternatives(gold, state, n, None, text, target_unit, rng, per_kind, rel_tol,
                                       enumerator=enumerator):
                out.append(SearchNegative(ANSWER_TIMING, t, pos_text, pos_json, render_candidate(givens, steps, alt),
                                          _json(alt.to_dict()), float(ans_values[0].value), v,
                                          f"went on with {alt.op}"))
    return out
