"""Verifier-first search over structured traces: config, problems, results, and the `run_search` entry point.

Methods (docs/search.md#methods):
- `nsprm`: k candidates per beam -> parse -> incremental verification (rejections feed a diagnostic into a
  bounded retry) -> PRM scores the survivors only -> top-B partial traces by an aggregate of step scores.
- `prm_only`: the same without the verifier filter: every parsed candidate is scored; a step's value is its
  claimed value, else it is computed ignoring units (steps with neither are unusable and dropped).
- `verifier_only`: the verifier filter without the PRM: survivors are kept in generator order.
- `greedy`: nsprm with B = 1.
- `best_of_n`: N whole traces sampled, verified, ranked by the PRM's aggregate over their steps.
- `dvts`: diverse verifier tree search: N/B subtrees (N = n_samples, B = beam_width), each a greedy search from
  one of the N/B best distinct first steps; their answered traces compete as in best_of_n.
The strategies live beside this module in pcr_ray/search/, each registered by name (pcr_ray.search.strategy);
this module holds the shared types.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pcr_ray.configs import SearchOptions, frozen_view
from pcr_ray.core.trace import Given
from pcr_ray.core.units import canonical_unit, try_unit_info
from pcr_ray.core.verifier import VerifierConfig
from pcr_ray.data.givens import extract
from pcr_ray.data.problem import Problem
from pcr_ray.search.selection import SELECTIONS
from pcr_ray.search.strategy import STRATEGIES, Strategy

AGGREGATES = ("last", "min", "mean", "prod")
STOPS = ("first", "best")


@dataclass(frozen=True)
class SearchConfig(frozen_view(SearchOptions, "SearchFields", first=(("method", "str", "nsprm"),))):
    """Search settings: `method` picks the variant, the rest bound the work done per problem. The fields, their
    defaults and meanings are pcr_ray.configs.SearchOptions' (the `search` config group's schema); the options a
    method reads are configs.SEARCH_SCHEMAS'. Children of equal aggregate keep generator order (answer
    declarations first)."""

    def __post_init__(self) -> None:
        strategy = STRATEGIES.get(self.method)  # an unknown method: UnknownNameError naming the known ones
        if self.answer_selection not in SELECTIONS:
            raise ValueError(f"answer_selection must be one of {SELECTIONS}, got {self.answer_selection!r}")
        if self.stop not in STOPS:
            raise ValueError(f"stop must be one of {STOPS}, got {self.stop!r}")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {self.aggregate!r}")
        for name in ("beam_width", "k", "max_steps", "n_complete", "n_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("max_retries", "max_backtracks", "max_feedback"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if not 0.0 <= self.verifier_coverage <= 1.0:
            raise ValueError(f"verifier_coverage must be in [0, 1] (the fraction of primitive families whose unit "
                             f"rules are checked), got {self.verifier_coverage}")
        if strategy.beam_width is not None and self.beam_width != strategy.beam_width:
            object.__setattr__(self, "beam_width", strategy.beam_width)

    @property
    def strategy(self) -> Strategy:
        """The registered strategy `method` names."""
        return STRATEGIES.get(self.method)

    @property
    def uses_verifier(self) -> bool:
        return self.strategy.uses_verifier

    @property
    def uses_prm(self) -> bool:
        return self.strategy.uses_prm

    @property
    def verifier_config(self) -> VerifierConfig:
        """The VerifierConfig of this search's verifier (its coverage)."""
        return VerifierConfig(coverage=float(self.verifier_coverage))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SearchConfig:
        """From a (Hydra) mapping; unknown keys are an error so that typos do not pass silently."""
        names = {f.name for f in fields(cls)}
        extra = set(d) - names
        if extra:
            raise ValueError(f"unknown search option(s) {sorted(extra)}; known: {sorted(names)}")
        return cls(**dict(d))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def aggregate(scores: Sequence[float], how: str) -> float:
    """A trace score from its step scores: last, min, mean or prod; 0.0 for no steps."""
    if not scores:
        return 0.0
    if how == "last":
        return float(scores[-1])
    if how == "min":
        return float(min(scores))
    if how == "mean":
        return float(sum(scores) / len(scores))
    if how == "prod":
        return float(math.prod(scores))
    raise ValueError(f"unknown aggregate {how!r}")


# where a search's givens and target unit come from: the problem text (what a user's run has), or the gold trace
# (an oracle ablation: every table, metrics.json and report that shows its numbers says "oracle givens")
GIVENS_MODES = ("extract", "gold")


def check_givens_mode(mode: str) -> str:
    """`mode` when it is one of GIVENS_MODES; else a ValueError naming them."""
    if mode not in GIVENS_MODES:
        raise ValueError(f"givens (pipeline.givens) must be extract (from the problem text) or gold (the gold "
                         f"trace's: an oracle ablation), got {mode!r}")
    return mode


@dataclass(frozen=True)
class SearchProblem:
    """What the search needs of a problem: text, givens, the asked unit ('' if unknown) and the gold answer."""

    id: str
    text: str
    givens: tuple[Given, ...]
    target_unit: str = ""
    gold_value: float | None = None
    gold_unit: str = ""
    source: str = ""
    gold_steps: int | None = None
    givens_source: str = ""  # extract | llm | gold (from_problem) | the extractor kind (solve)

    def __post_init__(self) -> None:
        if not isinstance(self.givens, tuple):
            object.__setattr__(self, "givens", tuple(self.givens))

    @classmethod
    def from_problem(cls, problem: Any, *, givens: str = "extract", extractor: Any = None) -> SearchProblem:
        """From a pcr_ray.data Problem (or its dict). givens: 'extract' | 'gold' (the oracle ablation).

        'extract': the givens and the target unit come from the problem text through `extractor` (default: the
        rule-based pcr_ray.data.givens); the gold trace is not read. 'gold': both come from the gold trace (its
        givens and its answer unit), which the trace's author picked with the answer key in hand: an oracle.
        """
        check_givens_mode(givens)
        if isinstance(problem, Mapping):
            row = dict(problem)
            if givens == "extract":
                row.pop("gold_trace", None)  # never parsed, never read: what a user's data without one gives
            problem = Problem.from_dict(row)
        if givens == "gold":
            trace = problem.gold_trace
            if not trace:
                raise ValueError(f"problem {problem.id} has no gold trace to take givens from: "
                                 f"use givens='extract'")
            gv = tuple(Given(g["name"], float(g["value"]), g.get("unit") or "dimensionless",
                             public_desc(g.get("desc", ""))) for g in trace.get("givens", []))
            answer = trace.get("answer") or []
            target = answer[0].get("unit", "") if answer else ""
            source = "gold"
        else:
            ex = extract(problem.text, extractor)
            gv = ex.givens
            target = target_unit_of(ex.target)
            source = "llm" if extractor is not None and type(extractor).__name__.startswith("LLM") else "extract"
        return cls(problem.id, problem.text, gv, target or "", problem.answer_value, problem.answer_unit or "",
                   problem.source, problem.gold_steps, source)


# The physics generator marks distractors in its gold data; a method must see only what the text says.
_GOLD_ANNOTATIONS = ("not needed: ",)


def public_desc(desc: str) -> str:
    """A gold given's description as a method may see it: without the data's own annotations."""
    for mark in _GOLD_ANNOTATIONS:
        if desc.startswith(mark):
            return desc[len(mark):]
    return desc


def target_unit_of(target: Any) -> str:
    """A unit string for an extractor Target: its unit when named, else the SI unit of its dimension, else ''."""
    unit = getattr(target, "unit", None)
    if unit and try_unit_info(unit) is not None:
        return unit
    dims = getattr(target, "dims", None)
    return canonical_unit(dims) if dims is not None else ""


@dataclass
class SearchResult:
    """The outcome of searching one problem, with everything needed to audit it."""

    id: str
    method: str
    answer_value: float | None = None
    answer_unit: str = ""
    answer_name: str = ""
    trace: dict[str, Any] | None = None
    trace_ok: bool = False
    final_diagnostics: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)  # final trace: rendered step, verdict, score
    score: float | None = None
    stop_reason: str = ""
    n_proposed: int = 0
    n_parsed: int = 0
    n_verified: int = 0
    n_scored: int = 0
    n_prm_calls: int = 0
    n_cache_hits: int = 0
    retries: int = 0
    backtracks: int = 0
    iterations: int = 0
    wall_s: float = 0.0
    gen_s: float = 0.0
    verify_s: float = 0.0
    prm_s: float = 0.0
    reject_codes: dict[str, int] = field(default_factory=dict)
    round_stats: dict[str, int] = field(default_factory=dict)  # first asks vs retries: proposed/parsed/verified
    candidates: list[dict[str, Any]] = field(default_factory=list)  # with log_candidates
    gold_value: float | None = None
    gold_unit: str = ""
    source: str = ""
    gold_steps: int | None = None
    givens_source: str = ""
    error: str = ""
    prompt_tokens: int = 0  # generator prompt tokens (0 for the enumerator, which has none)
    output_tokens: int = 0  # generator output tokens
    prm_tokens: int = 0  # tokens the PRM encoded for this problem's pairs (cache hits cost none)
    samples: list[dict[str, Any]] = field(default_factory=list)  # answered traces selection chose among:
    #   {score, order, value, unit} (best_of_n: each verified sample in generator order, with its index `i`
    #   and the new PRM calls and tokens it cost)

    @classmethod
    def for_problem(cls, p: SearchProblem, method: str) -> SearchResult:
        """An empty result for problem `p` (ids and gold fields filled), to be completed by a method."""
        return cls(id=p.id, method=method, gold_value=p.gold_value, gold_unit=p.gold_unit, source=p.source,
                   gold_steps=p.gold_steps, givens_source=p.givens_source)

    @property
    def answered(self) -> bool:
        return self.answer_value is not None

    def to_record(self) -> dict[str, Any]:
        """A flat row for parquet: nested parts as JSON strings."""
        row = asdict(self)
        row["answered"] = self.answered
        for key in ("trace", "final_diagnostics", "steps", "reject_codes", "round_stats", "candidates", "samples"):
            row[key] = json.dumps(row[key], separators=(",", ":"), default=str)
        return row
