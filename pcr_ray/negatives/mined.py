"""Listwise hard negatives (answer timing, wrong steps), mined from a PRM's own ranking along verified gold traces.

The `answer_timing` pairs of make-pairs set the gold answer against one random valid continuation. At search
time the answer competes with every valid continuation the generator offers at once (~40 for the typed
enumerator), and a PRM trained on random ones ranks a few of them above the answer: the search goes on past
the asked quantity and answers a later one. Mining fixes the negatives to the ones that matter: at the end of a
gold trace (every gold step done), the search's own candidates are enumerated, verified and scored by the PRM
being improved, and the `per_problem` highest-scored ones (continuation steps, or answers naming another
quantity) become negatives against the gold answer. A PRM trained on those learns to stop, and may then stop
too soon: `positions='early'` mines the other side, at each earlier gold prefix the gold step against the
answer declarations the search would offer there. Rows have make-pairs' columns and the kind
`mined_answer_timing` (t < gold_steps: the early side). `positions='steps'` mines the step ranking the search
needs before the end: at each earlier gold prefix, the gold step against the PRM's top-scored valid steps that
compute none of the quantities the gold trace computes from there on (kind `mined_alternative_step`). Contexts
and candidates are rendered exactly as the search renders them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pcr_ray.core.render import canonical_names, render_answer, render_context
from pcr_ray.core.trace import parse_trace
from pcr_ray.core.verifier import VerifierState
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.enumerate import EnumeratorGenerator
from pcr_ray.negatives.pairs import MINED_ALTERNATIVE_STEP, MINED_ANSWER_TIMING, MINED_KINDS, PAIR_COLUMNS, split_of
from pcr_ray.search import SearchProblem
from pcr_ray.search.candidates import check_answer_candidate, check_step_candidate, parse_candidate
from pcr_ray.search.scoring import pair_for

__all__ = ["MINED_ALTERNATIVE_STEP", "MINED_ANSWER_TIMING", "MINED_COLUMNS", "MINED_KINDS", "POSITIONS", "GoldState",
           "MineConfig", "final_state", "gold_state", "mine_rows", "mined_file_stem", "select_negatives"]
# mine_rows' rows: make-pairs' columns plus `margin` (r- minus r+ under the mining PRM; > 0: the PRM got it wrong)
MINED_COLUMNS: tuple[str, ...] = (*PAIR_COLUMNS, "margin")
# where along a gold trace mine-pairs mines, and the parquet file (stem) each setting writes in a split folder
POSITIONS: dict[str, str] = {"end": MINED_ANSWER_TIMING, "early": f"{MINED_ANSWER_TIMING}_early",
                             "steps": MINED_ALTERNATIVE_STEP, "all": "mined_all"}


def mined_file_stem(positions: str) -> str:
    """The file name (without .parquet) mine-pairs writes for a `positions` setting."""
    if positions not in POSITIONS:
        raise ValueError(f"positions must be one of {sorted(POSITIONS)}, got {positions!r}")
    return POSITIONS[positions]


def _default_generators() -> dict[str, dict[str, Any]]:
    # the search's generator settings by source prefix (bench_search_methods, conf/generator/): GSM8K arithmetic
    return {"gsm8k": {"ops": ["add", "sub", "mul", "div"], "literals": [2, 100]}}


@dataclass(frozen=True)
class MineConfig:
    """How many negatives per gold trace, from which enumerator, with which seed and split fractions."""

    per_problem: int = 4          # the top-scored wrong candidates kept per gold trace
    cap: int = 48                 # the typed enumerator's cap (the search's setting)
    seed: int = 0
    rel_tol: float = 1e-3         # an answer candidate within this of the gold value is not a negative
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    max_steps: int = 32
    generators: dict[str, dict[str, Any]] = field(default_factory=_default_generators)
    # end: the gold answer against continuations (stopping late); early: at each earlier gold prefix, the gold
    # step against answer declarations (stopping early: a PRM that learned to stop may stop too soon); steps: at
    # each earlier gold prefix, the gold step against wrong valid steps (ranking before the end); all: the three
    positions: str = "end"
    prefixes_per_problem: int = 0  # early/steps: at most this many earlier prefixes per trace (seeded); 0: all

    def __post_init__(self) -> None:
        if self.per_problem < 1:
            raise ValueError(f"per_problem must be >= 1, got {self.per_problem}")
        mined_file_stem(self.positions)
        if self.prefixes_per_problem < 0:
            raise ValueError(f"prefixes_per_problem must be >= 0 (0: all), got {self.prefixes_per_problem}")

    def generator_for(self, source: str) -> EnumeratorGenerator:
        """The typed enumerator the search would use on a problem of this source."""
        kw = next((dict(v) for pre, v in self.generators.items() if source.startswith(pre)), {})
        return EnumeratorGenerator(typed=True, cap=self.cap, seed=self.seed, answer_coverage="any", **kw)


@dataclass(frozen=True)
class GoldState:
    """One prefix of a gold trace: what the PRM scores there (the gold action first, then the wrong candidates)."""

    row: dict[str, Any]           # the row fields shared by its pairs
    pairs: list[tuple[str, str]]  # (context, rendered candidate); index 0 is the gold step or answer
    jsons: list[str]
    values: list[float]
    notes: list[str]
    # the enumerator offered the gold action or its equal (a step computing the gold step's quantity; at the
    # end, an answer of the gold value): False means the search could not take the gold path here, however
    # the PRM ranks
    offered: bool = False


def _same(a: float, b: float, rel_tol: float) -> bool:
    return abs(a - b) <= rel_tol * max(abs(a), abs(b)) + 1e-12


def gold_state(problem: Mapping[str, Any], cfg: MineConfig, t: int | None = None) -> tuple[GoldState | None, str]:
    """The gold action at prefix t of a problem's gold trace (its next step; at the end, t = None or the number
    of steps, its answer) and every valid candidate the search's enumerator offers there that is wrong: at the
    end, continuations and answers of other values; before it, answers (too early) and steps that compute
    none of the quantities the gold trace computes from t on. Or None and a status."""
    pid = str(problem.get("id") or "")
    gt = problem.get("gold_trace")
    if isinstance(gt, (str, bytes)):
        gt = json.loads(gt) if gt else None
    if not pid or not gt:
        return None, "no_trace"
    trace, errors = parse_trace(gt)
    if trace is None or not trace.answer:
        return None, f"invalid: {errors[0].message if errors else 'no answer'}"
    if not trace.steps or len(trace.steps) > cfg.max_steps:
        return None, f"invalid: {len(trace.steps)} steps"
    n = len(trace.steps)
    t = n if t is None else t
    if not 0 <= t <= n:
        raise ValueError(f"t must be in 0..{n} for {pid}, got {t}")
    sp = SearchProblem.from_problem(problem, givens="gold")
    state, diags = VerifierState.from_givens(sp.givens)
    if diags:
        return None, f"invalid: {diags[0].feedback()}"
    steps: list[Any] = []
    states = [state]
    for s in trace.steps:
        out = check_step_candidate(state, s, strict=True)
        if not out.ok or out.step is None:
            return None, f"invalid: gold step {s.out.name}: {out.diagnostic.feedback() if out.diagnostic else '?'}"
        state, steps = out.state, steps + [out.step]
        states.append(state)
    gold = check_answer_candidate(state, trace.answer, sp.target_unit, strict=True)
    if not gold.ok:
        return None, f"invalid: gold answer: {gold.diagnostic.feedback() if gold.diagnostic else '?'}"
    answer_value = float(gold.values[0].value)
    prefix, state = steps[:t], states[t]
    names = canonical_names(sp.givens, prefix)
    context = render_context(sp.text, sp.givens, prefix)
    if t == n:
        pairs = [(context, render_answer(trace.answer, [v.value for v in gold.values], names=names))]
        jsons = [json.dumps({"answer": [a.to_dict() for a in trace.answer]}, separators=(",", ":"))]
        values, notes, gold_keys = [answer_value], ["gold answer"], []
    else:
        g = steps[t]
        pairs = [pair_for(sp.text, sp.givens, prefix, g)]
        jsons = [json.dumps(g.to_dict(), separators=(",", ":"))]
        later = [states[i + 1].env[s.out.name] for i, s in enumerate(steps) if i >= t]
        values, notes, gold_keys = [float(g.value)], ["gold step"], [(v.dims, v.base) for v in later]
    source = str(problem.get("source") or "")
    req = ProposalRequest(sp.id, sp.text, sp.givens, tuple(prefix), k=cfg.cap, mode="step",
                          target_unit=sp.target_unit, seed=cfg.seed)
    seen = {pairs[0][1]}
    offered = False
    for raw in cfg.generator_for(source).propose([req])[0]:
        parsed = parse_candidate(raw, t)
        if not parsed.ok:
            continue
        if parsed.answer is not None:
            out_a = check_answer_candidate(state, parsed.answer, sp.target_unit, strict=True)
            if not out_a.ok:
                continue
            v = float(out_a.values[0].value)
            if _same(v, answer_value, cfg.rel_tol):
                offered = offered or t == n
                continue  # the asked quantity (under another name, or already at hand): not wrong
            text = render_answer(parsed.answer, [x.value for x in out_a.values], names=names)
            note = f"answered {parsed.answer[0].name} " + ("instead" if t == n else "too early")
        else:
            out_s = check_step_candidate(state, parsed.step, strict=True)
            if not out_s.ok or out_s.step is None:
                continue
            got = out_s.state.env[out_s.step.out.name]
            if any(got.dims == d and _same(got.base, b, cfg.rel_tol) for d, b in gold_keys):
                d0, b0 = gold_keys[0]
                offered = offered or (got.dims == d0 and _same(got.base, b0, cfg.rel_tol))
                continue  # a quantity the gold trace computes from here on (another way or order): not wrong
            text = pair_for(sp.text, sp.givens, prefix, out_s.step)[1]
            v = float(out_s.step.value) if out_s.step.value is not None else math.nan
            note = f"went on with {out_s.step.op}" if t == n else f"another step: {out_s.step.op}"
        if text in seen:
            continue
        seen.add(text)
        pairs.append((context, text))
        jsons.append(raw)
        values.append(v)
        notes.append(note)
    if len(pairs) < 2:
        return None, "no_candidates"
    row = {"problem_id": pid, "source": source, "split": split_of(pid, cfg.split_fractions),
           "kind": MINED_ANSWER_TIMING, "t": t, "gold_steps": n, "context": context,
           "prefix": json.dumps([s.to_dict() for s in prefix], separators=(",", ":"))}
    return GoldState(row, pairs, jsons, values, notes, offered), "ok"


def final_state(problem: Mapping[str, Any], cfg: MineConfig) -> tuple[GoldState | None, str]:
    """`gold_state` at the end of the gold trace: the gold answer against continuations and other answers."""
    return gold_state(problem, cfg, None)


def select_negatives(state: GoldState, scores: Sequence[float], per_problem: int) -> list[dict[str, Any]]:
    """Pair rows: the gold action against the `per_problem` highest-scored other candidates (ties by text)."""
    order = sorted(range(1, len(state.pairs)), key=lambda i: (-scores[i], state.pairs[i][1]))[:per_problem]
    rows = []
    for i in order:
        rows.append({**state.row, "pos_step": state.pairs[0][1], "pos_json": state.jsons[0],
                     "neg_step": state.pairs[i][1], "neg_json": state.jsons[i], "pos_value": state.values[0],
                     "neg_value": state.values[i], "verified": True,
                     "note": f"{state.notes[i]} (mined: r- {scores[i]:.4f} vs r+ {scores[0]:.4f})",
                     "margin": float(scores[i] - scores[0])})
    return rows


def _only(st: GoldState, answers: bool, kind: str) -> GoldState | None:
    """The gold action and either the answer declarations or the steps of a state, as pairs of `kind` (None
    when it has no such candidate)."""
    keep = [0] + [i for i in range(1, len(st.pairs)) if st.pairs[i][1].startswith("answer: ") == answers]
    if len(keep) < 2:
        return None
    return GoldState({**st.row, "kind": kind}, [st.pairs[i] for i in keep], [st.jsons[i] for i in keep],
                     [st.values[i] for i in keep], [st.notes[i] for i in keep], st.offered)


def _prefixes(pid: str, first: int, n: int, cfg: MineConfig) -> list[int]:
    """The earlier prefixes t in first..n-1 mined for one trace: all, or a seeded sample of prefixes_per_problem."""
    ts = list(range(first, n))
    k = cfg.prefixes_per_problem
    if k <= 0 or k >= len(ts):
        return ts
    return sorted(sorted(ts, key=lambda t: hashlib.sha1(f"{cfg.seed}:{pid}:{t}".encode()).hexdigest())[:k])


def mine_rows(problems: Sequence[Mapping[str, Any]], scorer: Any, cfg: MineConfig | None = None,
              ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Mined pair rows (MINED_COLUMNS) of many problems with one batched scorer call, and a count of statuses."""
    cfg = cfg or MineConfig()
    states: list[GoldState] = []
    status: dict[str, int] = {}
    for p in problems:
        st, why = final_state(p, cfg)
        key = why.split(":")[0]
        status[key] = status.get(key, 0) + 1
        if st is None:
            continue
        if cfg.positions in ("end", "all"):
            states.append(st)
        pid, n = st.row["problem_id"], st.row["gold_steps"]
        early_ts = _prefixes(pid, 1, n, cfg) if cfg.positions in ("early", "all") else []  # t = 0: nothing to answer
        step_ts = _prefixes(pid, 0, n, cfg) if cfg.positions in ("steps", "all") else []
        for t in sorted(set(early_ts) | set(step_ts)):
            before, _ = gold_state(p, cfg, t)
            if before is None:
                continue
            if t in early_ts and (early := _only(before, True, MINED_ANSWER_TIMING)) is not None:
                states.append(early)
            if t in step_ts and (other := _only(before, False, MINED_ALTERNATIVE_STEP)) is not None:
                states.append(other)
    flat = sorted({pair for st in states for pair in st.pairs})
    got = dict(zip(flat, scorer.score(flat), strict=True)) if flat else {}
    rows: list[dict[str, Any]] = []
    for st in states:
        rows.extend(select_negatives(st, [got[p] for p in st.pairs], cfg.per_problem))
    return [{c: r[c] for c in MINED_COLUMNS} for r in rows], status
