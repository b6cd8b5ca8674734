"""Word-problem counterfactuals: the verifier-passing mistakes a solver makes on GSM8K-style problems.

Each kind changes one gold step's arguments (or its op) in a way a reader of the problem would call wrong, and
keeps only what the verifier accepts (dimension and counted-kind rules included) and what changes the step's
value; steps after t are recomputed, as for CSP (`pcr_ray.negatives.csp.accept_first`):

- `inverse_operation`: a difference or quotient the wrong way round (`sub(b, a)`, `div(b, a)`: a rate divided
  the wrong way), or the inverse op on the same arguments (`mul` <-> `div`, `add` <-> `sub`);
- `distractor`: an argument replaced by a given the gold trace never uses (a number the text states but the
  answer does not need): the trace's own unused givens, and what `distractor_givens` reads from the problem text
  beyond the gold givens (the J- then carries those givens, as a search's extracted givens would);
- `stale_intermediate`: an argument that is a computed quantity replaced by an earlier computed quantity or one
  of the values it was computed from, a sum's parts aside (the right operation on an outdated total);
- `part_for_whole`: an argument that is a sum (`add`/`sum`) replaced by one of its parts.

Pure Python, seeded by (seed, trace key, t, kind) like CSP.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pcr_ray.core.trace import Given, Step
from pcr_ray.data.givens import extract, given_matches
from pcr_ray.negatives.csp import (
    CSPConfig,
    CSPError,
    GoldRun,
    Negative,
    accept_first,
    prepare_gold,
    step_rng,
    substituted,
)

INVERSE_OPERATION = "inverse_operation"
DISTRACTOR = "distractor"
STALE_INTERMEDIATE = "stale_intermediate"
PART_FOR_WHOLE = "part_for_whole"
WORD_KINDS: tuple[str, ...] = (INVERSE_OPERATION, DISTRACTOR, STALE_INTERMEDIATE, PART_FOR_WHOLE)

_INVERSE = {"mul": "div", "div": "mul", "add": "sub", "sub": "add"}
_BINARY = {"add", "sub", "mul", "div"}


def _binary_args(step: Step) -> tuple[Any, Any] | None:
    if step.op not in _BINARY or set(step.args) != {"x", "y"}:
        return None
    return step.args["x"], step.args["y"]


def _inverse_steps(step: Step) -> list[tuple[Step, str]]:
    xy = _binary_args(step)
    if xy is None:
        return []
    x, y = xy
    out: list[tuple[Step, str]] = []
    if step.op in ("sub", "div"):
        out.append((Step(step.op, {"x": y, "y": x}, step.out), f"{step.op}: arguments swapped"))
    inv = _INVERSE[step.op]
    out.append((Step(inv, {"x": x, "y": y}, step.out), f"{step.op} -> {inv}"))
    if inv in ("sub", "div"):
        out.append((Step(inv, {"x": y, "y": x}, step.out), f"{step.op} -> {inv}, arguments swapped"))
    return out


def _used_names(gold: GoldRun) -> set[str]:
    return {a for s in gold.trace.steps for a in s.args.values() if isinstance(a, str)}


def _substitutions(step: Step, options: dict[str, list[str]]) -> list[tuple[Step, str]]:
    """`step` with one variable argument replaced, for each (argument name -> replacements) option."""
    return list(substituted(step, [(pname, new) for pname, news in options.items() for new in news]))


def _candidates(gold: GoldRun, t: int, kind: str) -> list[tuple[Step, str]]:
    pos = gold.trace.steps[t]
    var_args = {k: a for k, a in pos.args.items() if isinstance(a, str)}
    given_names = [g.name for g in gold.trace.givens]
    computed = [s.out.name for s in gold.trace.steps[:t]]
    if kind == INVERSE_OPERATION:
        return _inverse_steps(pos)
    if kind == DISTRACTOR:
        unused = [g for g in given_names if g not in _used_names(gold)]
        return _substitutions(pos, {k: unused for k in var_args})
    producers = {s.out.name: s for s in gold.trace.steps[:t]}
    if kind == STALE_INTERMEDIATE:
        options: dict[str, list[str]] = {}
        for k, a in var_args.items():
            if a in producers:
                i = computed.index(a)
                inputs = [v for v in producers[a].args.values() if isinstance(v, str)]
                parts = set(inputs) if producers[a].op in ("add", "sum") else set()  # part_for_whole's
                options[k] = [n for n in dict.fromkeys(computed[:i] + inputs) if n != a and n not in parts]
        return _substitutions(pos, options)
    if kind == PART_FOR_WHOLE:
        options = {k: [v for v in producers[a].args.values() if isinstance(v, str)]
                   for k, a in var_args.items() if a in producers and producers[a].op in ("add", "sum")}
        return _substitutions(pos, options)
    raise ValueError(f"unknown word-problem kind {kind!r}; known: {list(WORD_KINDS)}")


def word_negatives(gold: GoldRun, t: int, kind: str, rng: random.Random, cfg: CSPConfig) -> list[Negative]:
    """Up to cfg.max_per_kind verifier-passing negatives of one word-problem kind at gold step t."""
    cands = _candidates(gold, t, kind)
    rng.shuffle(cands)
    return accept_first(gold, t, cands, kind, cfg)


def distractor_givens(text: str, givens: Sequence[Given], steps: Sequence[Step] = ()) -> tuple[Given, ...]:
    """The quantities the rule-based extractor reads from `text` whose value no given of `givens` and no literal of
    `steps` has (a percent also not as a fraction), named apart from them as the extractor names (`n_apples_3`):
    the numbers a search sees that the gold trace has no use for."""
    if not text:
        return ()
    taken = {g.name for g in givens}
    literals = [float(a) for s in steps for a in s.args.values() if not isinstance(a, str)]
    values = [float(g.value) for g in givens] + literals
    ratios = [a / b for a in values + [1.0] for b in values if b]  # "2/3", "a third": one number the gold splits
    known = list(givens) + [Given(f"_{i}", v) for i, v in enumerate(literals + [v / 100 for v in literals] + ratios)]
    out: list[Given] = []
    for f in extract(text).givens:
        if given_matches(f, known, check_dims=False) or given_matches(replace(f, value=f.value / 100), known,
                                                                       check_dims=False):
            continue
        name, i = f.name, 1
        while name in taken:  # the extractor's own naming: a numeric suffix, nothing that marks a distractor
            i += 1
            name = f"{f.name.rsplit('_', 1)[0] if f.name.rsplit('_', 1)[-1].isdigit() else f.name}_{i}"
        taken.add(name)
        out.append(replace(f, name=name))
    return tuple(out)


def word_counterfactuals(gold: GoldRun, *, key: str = "", kinds: tuple[str, ...] = WORD_KINDS,
                         config: CSPConfig | None = None, distractors: Sequence[Given] = ()) -> list[Negative]:
    """The word-problem negatives of every gold step, deduplicated per step (`key` seeds them, as for CSP);
    `distractors` (e.g. `distractor_givens` of the problem text) join the givens for the `distractor` kind."""
    cfg = config or CSPConfig()
    bad = [k for k in kinds if k not in WORD_KINDS]
    if bad:
        raise ValueError(f"unknown word-problem kind(s) {bad}; known: {list(WORD_KINDS)}")
    with_distractors = gold
    if distractors and DISTRACTOR in kinds:
        try:
            with_distractors = prepare_gold(replace(gold.trace, givens=tuple(gold.trace.givens) + tuple(distractors)))
        except CSPError:
            with_distractors = gold  # a distractor the verifier does not take (an unknown unit): the trace's own
    out: list[Negative] = []
    for t in range(len(gold.trace.steps)):
        seen: set[tuple[Any, ...]] = set()
        for kind in kinds:
            base = with_distractors if kind == DISTRACTOR else gold
            for neg in word_negatives(base, t, kind, step_rng(cfg.seed, key, t, kind), cfg):
                if neg.key() not in seen:
                    seen.add(neg.key())
                    out.append(neg)
    return out
