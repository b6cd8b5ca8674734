"""A first-error benchmark on unit-bearing traces (ProcessBench-style): traces with a planted error at a known step.

From problems with a verified gold trace, each problem yields one item: half are left correct (label -1), half
get one error planted at a step t drawn uniformly (label t, the earliest wrong step: the prefix before t is the
gold one), alternately by CSP (`counterfactuals`: a principle swap or a variable substitution, which the
verifier accepts) and by random perturbation (`random_negatives`: a random op, a random argument, or noise on
the claimed value, which the verifier may reject). Steps after t are the gold ones recomputed from the changed
value. Every choice is seeded by (seed, problem id), so the output depends on neither order nor sharding; the
split (validation / test) is a hash of the problem id. A planted error must change the value at t (CSP checks
it) and, when the trace verifies, its answer; a problem where no error can be planted stays correct.

`score_predictions` computes ProcessBench's F1: the harmonic mean of the accuracy on traces with an error
(predicted index == label) and on correct traces (predicted -1). Pure Python: no Ray, no torch.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pcr_ray.core.trace import Given, Trace, parse_trace
from pcr_ray.core.verifier import VerifierConfig, verify
from pcr_ray.negatives.csp import CSPConfig, CSPError, Negative, counterfactuals, prepare_gold, random_negatives
from pcr_ray.search.types import public_desc

CORRECT = -1  # the label of a trace without an error
ANSWER_STEP = -2  # a verifier prediction of an error in the answer declaration (no step index): never a label
SOURCES_OF_ERRORS = ("csp", "random")
BENCH_COLUMNS: tuple[str, ...] = (
    "id", "problem_id", "source", "split", "text", "trace_json", "n_steps", "label", "error_source", "error_kind",
    "error_note", "verifier_ok", "gold_answer_value", "gold_answer_unit",
)


@dataclass(frozen=True)
class BenchConfig:
    """Seed, the share of traces left correct, the validation share, and the tolerance a planted error must beat."""

    seed: int = 0
    correct_share: float = 0.5
    validation_share: float = 0.3
    rel_tol: float = 1e-3

    def __post_init__(self) -> None:
        if not 0.0 <= self.correct_share <= 1.0 or not 0.0 <= self.validation_share <= 1.0:
            raise ValueError("correct_share and validation_share must be in [0, 1]")


@dataclass(frozen=True)
class BenchItem:
    """One benchmark row: the trace (givens, steps with their claimed values, answer) and its first-error label."""

    id: str
    problem_id: str
    source: str
    split: str
    text: str
    trace_json: str
    n_steps: int
    label: int
    error_source: str
    error_kind: str
    error_note: str
    verifier_ok: bool
    gold_answer_value: float | None
    gold_answer_unit: str

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


def _unit_hash(*parts: Any) -> float:
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64


def split_of(problem_id: str, cfg: BenchConfig) -> str:
    """'validation' or 'test', by a hash of the problem id (seed-independent: the split never moves)."""
    return "validation" if _unit_hash("first_error_split", problem_id) < cfg.validation_share else "test"


def _public(trace: Trace) -> Trace:
    """The trace with the gold data's own annotations removed from the givens' descriptions."""
    return Trace(tuple(Given(g.name, g.value, g.unit, public_desc(g.desc)) for g in trace.givens), trace.steps,
                 trace.answer)


def _answer_base(trace: Trace) -> float | None:
    v = verify(trace)
    return v.answer[0].base if v.ok and v.answer else None


def _plant(gold_trace: Trace, key: str, kind: str, cfg: BenchConfig, rng: random.Random) -> Negative | None:
    """One negative of `kind` ('csp' or 'random') at a step drawn uniformly, trying the other steps in random order
    when a step has none; None when no step takes one."""
    gold = prepare_gold(gold_trace)
    n = len(gold.trace.steps)
    gold_answer = _answer_base(gold.trace)
    ccfg = CSPConfig(seed=cfg.seed, rel_tol=cfg.rel_tol)
    for t in rng.sample(range(n), n):
        negs = (counterfactuals(gold, t, key=key, config=ccfg) if kind == "csp"
                else random_negatives(gold, t, key=key, config=CSPConfig(kinds=("random_op", "random_arg",
                                                                               "random_noise"),
                                                                        seed=cfg.seed, rel_tol=cfg.rel_tol)))
        usable = []
        for neg in negs:
            ans = _answer_base(neg.trace)
            if ans is not None and gold_answer is not None and math.isclose(ans, gold_answer, rel_tol=cfg.rel_tol):
                continue  # the error does not reach the answer: not a wrong trace
            usable.append(neg)
        if usable:
            return usable[rng.randrange(len(usable))]
    return None


def bench_item(problem: Any, cfg: BenchConfig = BenchConfig()) -> BenchItem | None:
    """The benchmark row of one problem (a pcr_ray Problem or its dict) with a gold trace; None when its gold
    trace does not verify (it cannot anchor a label)."""
    p = problem if isinstance(problem, Mapping) else problem.to_dict()
    pid = str(p["id"])
    raw = p.get("gold_trace")
    if raw is None:
        return None
    parsed, _ = parse_trace(json.loads(raw) if isinstance(raw, (str, bytes)) else raw)
    if parsed is None:
        return None
    try:
        gold = prepare_gold(_public(parsed))
    except CSPError:
        return None
    rng = random.Random(f"first_error|{cfg.seed}|{pid}")
    wants_error = rng.random() >= cfg.correct_share
    kind = SOURCES_OF_ERRORS[rng.randrange(2)]
    neg = _plant(gold.trace, pid, kind, cfg, rng) if wants_error else None
    trace, label, ekind, note = gold.trace, CORRECT, "", ""
    if neg is not None:
        trace, label, ekind, note = neg.trace, neg.t, neg.kind, neg.note
    return BenchItem(
        id=f"{pid}#fe{cfg.seed}", problem_id=pid, source=str(p.get("source") or ""), split=split_of(pid, cfg),
        text=str(p.get("text") or ""), trace_json=trace.to_json(), n_steps=len(trace.steps), label=label,
        error_source=kind if neg is not None else "", error_kind=ekind, error_note=note,
        verifier_ok=verify(trace).ok, gold_answer_value=p.get("answer_value"),
        gold_answer_unit=str(p.get("answer_unit") or ""))


def build_bench(problems: Iterable[Any], cfg: BenchConfig = BenchConfig()) -> list[BenchItem]:
    """The rows of every problem whose gold trace verifies, in input order."""
    return [it for it in (bench_item(p, cfg) for p in problems) if it is not None]


# ---------------------------------------------------------------- predictions and F1


def verifier_prediction(trace: Trace | Mapping[str, Any] | str, config: VerifierConfig = VerifierConfig()) -> int:
    """The first step the verifier rejects; CORRECT when it accepts; ANSWER_STEP for a rejected answer."""
    v = verify(trace, config)
    if v.ok:
        return CORRECT
    d = v.first_failure
    return d.step if d is not None and d.step is not None else ANSWER_STEP


def threshold_prediction(scores: Sequence[float], threshold: float) -> int:
    """The first step scored below `threshold`; CORRECT when none is."""
    return next((i for i, s in enumerate(scores) if s < threshold), CORRECT)


def combined_prediction(verifier: int, scores: Sequence[float], threshold: float) -> int:
    """The first step the verifier rejects or the PRM scores below `threshold` (the earlier of the two)."""
    prm = threshold_prediction(scores, threshold)
    if verifier == ANSWER_STEP:
        return prm if prm != CORRECT else ANSWER_STEP
    hits = [x for x in (verifier, prm) if x != CORRECT]
    return min(hits) if hits else CORRECT


@dataclass(frozen=True)
class FirstErrorScore:
    """Accuracy on traces with an error (exact index), on correct traces ("no error"), and their harmonic mean."""

    n_error: int
    n_correct: int
    hits_error: int
    hits_correct: int

    @property
    def acc_error(self) -> float:
        return self.hits_error / self.n_error if self.n_error else 0.0

    @property
    def acc_correct(self) -> float:
        return self.hits_correct / self.n_correct if self.n_correct else 0.0

    @property
    def f1(self) -> float:
        a, b = self.acc_error, self.acc_correct
        return 2 * a * b / (a + b) if a + b > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"n_error": self.n_error, "n_correct": self.n_correct, "hits_error": self.hits_error,
                "hits_correct": self.hits_correct, "acc_error": self.acc_error, "acc_correct": self.acc_correct,
                "f1": self.f1}


def score_predictions(labels: Sequence[int], predictions: Sequence[int]) -> FirstErrorScore:
    """ProcessBench's scoring of first-error predictions against labels (CORRECT for a trace without an error)."""
    if len(labels) != len(predictions):
        raise ValueError(f"{len(labels)} labels but {len(predictions)} predictions")
    err = [(y, p) for y, p in zip(labels, predictions, strict=True) if y != CORRECT]
    ok = [p for y, p in zip(labels, predictions, strict=True) if y == CORRECT]
    return FirstErrorScore(len(err), len(ok), sum(y == p for y, p in err), sum(p == CORRECT for p in ok))


def best_threshold(labels: Sequence[int], scores: Sequence[Sequence[float]],
                   verifier: Sequence[int] | None = None) -> tuple[float, FirstErrorScore]:
    """The threshold that maximises F1 on these (validation) traces, over every distinct step score (and 0: no
    step below it); with `verifier` predictions, of the combined rule."""
    cands = sorted({0.0, *(s for ss in scores for s in ss)})
    cands += [math.nextafter(c, math.inf) for c in cands]  # "below" is strict: just above a score flags it
    best: tuple[float, FirstErrorScore] | None = None
    for th in sorted(set(cands)):
        if verifier is None:
            preds = [threshold_prediction(ss, th) for ss in scores]
        else:
            preds = [combined_prediction(v, ss, th) for v, ss in zip(verifier, scores, strict=True)]
        sc = score_predictions(labels, preds)
        if best is None or sc.f1 > best[1].f1:
            best = (th, sc)
    assert best is not None
    return best
