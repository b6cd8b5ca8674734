"""A gold-path oracle in the scorer's place: what the search reaches with a PRM that knows the gold trace.

`GoldPathScorer.score(pairs)` takes the (context, candidate) texts the search sends a PRM and scores each by the
problem's verified gold trace: an answer declaration of the gold answer value 1.0, a step computing a gold
step's value (same dimension, 4 significant digits as rendered) not yet in the prefix 0.9, a gold value the
prefix already holds 0.05, anything else 0.0. Run in the PRM's place it measures the ceiling of a search
configuration (enumerator cap, beam, step limit): a problem it does not solve cannot be solved by any PRM along
the gold path. A diagnostic for benchmarks, never a method: it reads the gold answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pcr_ray.core.render import render_context
from pcr_ray.core.units import Dims, try_unit_info
from pcr_ray.core.verifier import verify
from pcr_ray.search.types import SearchProblem

ANSWER, GOLD_STEP, REPEATED, OTHER = 1.0, 0.9, 0.05, 0.0
REL_TOL = 2e-3  # values are rendered with 4 significant digits
_VALUE = re.compile(r"= (?P<v>[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|[-+]?inf|nan)(?: \[(?P<u>[^\]]*)\])?$")


@dataclass(frozen=True)
class GoldPath:
    """One problem's gold quantities in base units: every step's (value, dims) and the answer's."""

    context: str  # render_context(text, givens, ()): how every context of this problem starts (its search's givens)
    steps: tuple[tuple[float, Dims], ...]
    answer: tuple[float, Dims]


def _quantity(text: str) -> tuple[float, Dims] | None:
    """(base value, dims) of a rendered `... = value [unit]`, or None when the text carries no value."""
    m = _VALUE.search(text.strip())
    if m is None:
        return None
    info = try_unit_info(m.group("u") or "dimensionless")
    if info is None:
        return None
    return info.to_base(float(m.group("v"))), info.dims


def _same(a: tuple[float, Dims], b: tuple[float, Dims]) -> bool:
    return a[1] == b[1] and math.isclose(a[0], b[0], rel_tol=REL_TOL)  # relative only: SI values span 1e-30..1e30


def gold_path(problem: Any, givens: str = "gold") -> GoldPath:
    """The GoldPath of a pcr_ray Problem (or its dict) with a gold trace, for a search from `givens` (`gold` or
    `extract`: the contexts it will be asked about start with those); ValueError when no gold trace verifies."""
    sp = SearchProblem.from_problem(problem, givens=givens)
    trace = problem["gold_trace"] if isinstance(problem, Mapping) else problem.gold_trace
    v = verify(trace)
    if not v.ok or not v.answer:
        raise ValueError(f"problem {sp.id}: its gold trace does not verify to an answer ({v.first_failure})")
    return GoldPath(render_context(sp.text, sp.givens, ()), tuple((s.base, s.dims) for s in v.steps),
                    (v.answer[0].base, v.answer[0].dims))


class GoldPathScorer:
    """Scores (context, candidate) pairs of known problems by their gold paths (see the module docstring)."""

    def __init__(self, paths: Iterable[GoldPath]) -> None:
        self.paths = sorted(paths, key=lambda p: -len(p.context))  # the longest matching problem text wins
        self.identity = {"kind": "gold_path_oracle"}

    @classmethod
    def from_problems(cls, problems: Iterable[Any], givens: str = "gold") -> GoldPathScorer:
        return cls(gold_path(p, givens) for p in problems)

    def _path(self, context: str) -> GoldPath:
        for p in self.paths:
            if context == p.context or context.startswith(p.context + " | steps: "):
                return p
        raise KeyError(f"the oracle knows no problem of this context: {context[:120]!r}")

    def score_one(self, context: str, candidate: str) -> float:
        path = self._path(context)
        q = _quantity(candidate.split("; ")[0] if candidate.startswith("answer: ") else candidate)
        if q is None:
            return OTHER
        if candidate.startswith("answer: "):
            return ANSWER if _same(q, path.answer) else OTHER
        if not any(_same(q, g) for g in path.steps):
            return OTHER
        steps = context.split(" | steps: ", 1)[1].split("; ") if " | steps: " in context else []
        done = [d for d in (_quantity(s) for s in steps) if d is not None]
        return REPEATED if any(_same(q, d) for d in done) else GOLD_STEP

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return [self.score_one(c, s) for c, s in pairs]


class GoldRankProbe:
    """The gold-path oracle drives the search while a PRM scores the same candidates on the side: at every prefix
    with a gold candidate among two or more, records where the PRM ranks the best gold candidate (1 = first; ties
    count against it). A beam of width B keeps the gold path only while that rank is within B at each step, so
    this measures the PRM's share of a search's misses apart from the search's ceiling. A diagnostic: it reads the
    gold trace."""

    def __init__(self, oracle: GoldPathScorer, scorer: Any) -> None:
        self.oracle, self.scorer = oracle, scorer
        self.identity = {"kind": "gold_rank_probe", "scorer": getattr(scorer, "identity", None)}
        self.ranks: dict[str, list[tuple[int, int]]] = {"step": [], "answer": []}  # (rank, candidates)

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        truth, scores = self.oracle.score(pairs), self.scorer.score(list(pairs))
        groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for (context, cand), t, s in zip(pairs, truth, scores, strict=True):
            kind = "answer" if cand.startswith("answer: ") else "step"
            groups.setdefault((context, kind), []).append((t, float(s)))
        for (_, kind), group in groups.items():
            target = ANSWER if kind == "answer" else GOLD_STEP
            gold = [s for t, s in group if t >= target]
            if gold and len(group) > 1:
                best = max(gold)
                self.ranks[kind].append((1 + sum(s >= best for t, s in group if t < target), len(group)))
        return truth

    def summary(self, beam: int) -> dict[str, Any]:
        """Per kind: decisions, the share where gold ranks first and within `beam`, median rank and candidates."""
        out: dict[str, Any] = {}
        for kind, ranks in self.ranks.items():
            if not ranks:
                continue
            n = len(ranks)
            out[kind] = {"decisions": n, "top1": round(sum(r == 1 for r, _ in ranks) / n, 4),
                         "within_beam": round(sum(r <= beam for r, _ in ranks) / n, 4),
                         "median_rank": sorted(r for r, _ in ranks)[n // 2],
                         "median_candidates": sorted(c for _, c in ranks)[n // 2]}
        return out
