"""Pair records: (context, positive step, negative step) rows made from gold traces by CSP or random perturbation.

Pure Python (no Ray, no torch): the Ray Data job (`pcr-ray make-pairs`) maps `pair_records` over problems, and
`checkpoints.ensure_checkpoint` calls it in-process. The split is a hash of the problem id, so no problem is
in two splits whatever the sharding.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pcr_ray.core.render import render_candidate, render_context
from pcr_ray.negatives.csp import (
    CSP_KINDS,
    RANDOM_KINDS,
    CSPConfig,
    CSPError,
    counterfactuals,
    prepare_gold,
    random_negatives,
)
from pcr_ray.negatives.search_pairs import ANSWER_TIMING, SEARCH_KINDS, search_negatives
from pcr_ray.negatives.word import DISTRACTOR, WORD_KINDS, distractor_givens, word_counterfactuals

SPLITS: tuple[str, ...] = ("train", "validation", "test")
PAIR_COLUMNS: tuple[str, ...] = (
    "problem_id", "source", "split", "kind", "t", "gold_steps", "context", "prefix", "pos_step", "pos_json",
    "neg_step", "neg_json", "pos_value", "neg_value", "verified", "note",
)
# which pair kinds train which PRM: the NS-PRM learns from verifier-passing negatives only (CSP and the
# search-matched kinds); the conventional PRM from random perturbations. Both see `answer_timing` pairs,
# because both decide when a search stops (answer declarations are scored like steps). The word-problem kinds
# (pcr_ray/negatives/word.py) are made and evaluated but trained on only when asked (train-prm kinds=[...]): the
# quick PRM trained with them ranked GSM8K's gold steps no better across seeds (docs/results.md, GSM8K).
KIND_GROUPS: dict[str, tuple[str, ...]] = {"csp": CSP_KINDS + SEARCH_KINDS, "random": RANDOM_KINDS + (ANSWER_TIMING,)}
ALL_PAIR_KINDS: tuple[str, ...] = CSP_KINDS + WORD_KINDS + SEARCH_KINDS + RANDOM_KINDS
# mine-pairs' kinds (pcr_ray/negatives/mined.py): negatives a trained PRM ranked high at gold prefixes; the NS-PRM
# trains on them when the pairs folder has them. answer timing: the gold answer against continuations at the
# end (and the gold step against too-early answers before it); alternative step: the gold step against wrong
# valid steps before the end.
MINED_ANSWER_TIMING = "mined_answer_timing"
MINED_ALTERNATIVE_STEP = "mined_alternative_step"
MINED_KINDS: tuple[str, ...] = (MINED_ANSWER_TIMING, MINED_ALTERNATIVE_STEP)


@dataclass(frozen=True)
class PairConfig:
    """How many pairs per gold step, of which kinds, with which seed and split fractions."""

    csp_per_kind: int = 2
    random_per_kind: int = 1
    search_per_kind: int = 0  # alternative steps / answer-timing negatives per prefix; 0: csp_per_kind
    kinds: tuple[str, ...] = ALL_PAIR_KINDS
    seed: int = 0
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    rel_tol: float = 1e-3
    max_steps: int = 32
    # the enumerator options the alternative steps are made with, by source prefix (what the search's generator
    # overrides give that source: GSM8K's arithmetic, its steps declared in their operands' units)
    alt_enumerator_by_source: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {"gsm8k": {"ops": ("add", "sub", "mul", "div"), "out_units": "operands"}})
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in ALL_PAIR_KINDS]
        if bad:
            raise ValueError(f"unknown pair kind(s) {bad}; known: {list(ALL_PAIR_KINDS)}")
        if len(self.split_fractions) != 3 or any(f < 0 for f in self.split_fractions) or \
                not math.isclose(sum(self.split_fractions), 1.0, abs_tol=1e-6):
            raise ValueError(f"split_fractions must be three non-negative numbers summing to 1, "
                             f"got {self.split_fractions}")


def split_of(problem_id: str, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1), salt: str = "pairs") -> str:
    """train / validation / test from a stable hash of the problem id."""
    h = int.from_bytes(hashlib.sha1(f"{salt}:{problem_id}".encode()).digest()[:8], "big") / 2.0**64
    if h < fractions[0]:
        return "train"
    if h < fractions[0] + fractions[1]:
        return "validation"
    return "test"


def _trace_of(problem: Mapping[str, Any]) -> Any:
    gt = problem.get("gold_trace")
    if isinstance(gt, (str, bytes)):
        gt = json.loads(gt) if gt else None
    return gt


def pair_records(problem: Mapping[str, Any], cfg: PairConfig | None = None) -> tuple[list[dict[str, Any]], str]:
    """All pair rows of one problem (a Problem.to_dict() row) and a status: 'ok', 'no_trace' or 'invalid: ...'."""
    cfg = cfg or PairConfig()
    pid = str(problem.get("id") or problem.get("problem_id") or "")
    if not pid:
        return [], "invalid: no problem id"
    gt = _trace_of(problem)
    if not gt:
        return [], "no_trace"
    try:
        gold = prepare_gold(gt)
    except CSPError as exc:
        return [], f"invalid: {exc}"
    n = len(gold.trace.steps)
    if n == 0 or n > cfg.max_steps:
        return [], f"invalid: {n} steps"
    csp_kinds = tuple(k for k in cfg.kinds if k in CSP_KINDS)
    rnd_kinds = tuple(k for k in cfg.kinds if k in RANDOM_KINDS)
    negs = []
    if csp_kinds and cfg.csp_per_kind > 0:
        negs += counterfactuals(gold, key=pid, config=CSPConfig(max_per_kind=cfg.csp_per_kind, kinds=csp_kinds,
                                                                seed=cfg.seed, rel_tol=cfg.rel_tol))
    text = str(problem.get("text") or "")
    word_kinds = tuple(k for k in cfg.kinds if k in WORD_KINDS)
    if word_kinds and cfg.csp_per_kind > 0:
        distractors = distractor_givens(text, gold.trace.givens, gold.trace.steps) if DISTRACTOR in word_kinds else ()
        word_cfg = CSPConfig(max_per_kind=cfg.csp_per_kind, seed=cfg.seed, rel_tol=cfg.rel_tol)
        negs += word_counterfactuals(gold, key=pid, kinds=word_kinds, distractors=distractors, config=word_cfg)
    if rnd_kinds and cfg.random_per_kind > 0:
        negs += random_negatives(gold, key=pid, per_kind=cfg.random_per_kind,
                                 config=CSPConfig(kinds=rnd_kinds, seed=cfg.seed, rel_tol=cfg.rel_tol))
    search_kinds = tuple(k for k in cfg.kinds if k in SEARCH_KINDS)
    source = str(problem.get("source") or "")
    alt_enum = next((dict(o) for pre, o in cfg.alt_enumerator_by_source.items() if source.startswith(pre)), None)
    per_search = cfg.search_per_kind or cfg.csp_per_kind
    extra = search_negatives(gold, text, key=pid, kinds=search_kinds, per_kind=per_search, seed=cfg.seed,
                             rel_tol=cfg.rel_tol, enumerator=alt_enum) if search_kinds and per_search > 0 else []
    split = split_of(pid, cfg.split_fractions)
    givens = gold.trace.givens
    contexts: dict[tuple[int, int], tuple[str, str]] = {}
    rows: list[dict[str, Any]] = []
    def context(t: int, gs: tuple[Any, ...] = givens) -> tuple[str, str]:
        if (t, len(gs)) not in contexts:
            prefix = gold.trace.steps[:t]
            contexts[(t, len(gs))] = (render_context(text, gs, prefix),
                                      json.dumps([s.to_dict() for s in prefix], separators=(",", ":")))
        return contexts[(t, len(gs))]

    for neg in negs:
        gs = neg.trace.givens  # a distractor's J- carries the text's other numbers as givens; its pair's context too
        ctx, prefix_json = context(neg.t, gs)
        rows.append({
            "problem_id": pid, "source": source, "split": split, "kind": neg.kind, "t": neg.t, "gold_steps": n,
            "context": ctx, "prefix": prefix_json,
            "pos_step": render_candidate(gs, gold.trace.steps[:neg.t], neg.positive),
            "pos_json": json.dumps(neg.positive.to_dict(), separators=(",", ":")),
            "neg_step": render_candidate(gs, gold.trace.steps[:neg.t], neg.step),
            "neg_json": json.dumps(neg.step.to_dict(), separators=(",", ":")),
            "pos_value": float(neg.pos_value),
            "neg_value": float("nan") if neg.neg_value is None else float(neg.neg_value),
            "verified": bool(neg.verified), "note": neg.note,
        })
    for sn in extra:
        ctx, prefix_json = context(sn.t)
        rows.append({
            "problem_id": pid, "source": source, "split": split, "kind": sn.kind, "t": sn.t, "gold_steps": n,
            "context": ctx, "prefix": prefix_json, "pos_step": sn.pos_text, "pos_json": sn.pos_json,
            "neg_step": sn.neg_text, "neg_json": sn.neg_json, "pos_value": sn.pos_value,
            "neg_value": sn.neg_value, "verified": True, "note": sn.note,
        })
    return rows, "ok"


def _pair_rows(batch: tuple[list[Mapping[str, Any]], PairConfig | None]) -> list[list[dict[str, Any]]]:
    problems, cfg = batch
    return [pair_records(p, cfg)[0] for p in problems]


def pairs_from_problems(problems: Iterable[Mapping[str, Any]], cfg: PairConfig | None = None,
                        processes: int = 1) -> list[dict[str, Any]]:
    """pair_records over many problems, in order (the Ray job does the same per batch); `processes` > 1 makes them
    in that many worker processes (spawned: the caller may hold torch's threads), every processes-th problem each."""
    problems = list(problems)
    processes = max(1, min(processes, len(problems) // 50))  # a process's start costs what ~50 problems do
    if processes == 1:
        return [row for rows in _pair_rows((problems, cfg)) for row in rows]
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        shares = list(pool.map(_pair_rows, [(problems[i::processes], cfg) for i in range(processes)]))
    return [row for i in range(len(problems)) for row in shares[i % processes][i // processes]]
