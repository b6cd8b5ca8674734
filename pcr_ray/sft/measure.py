"""How often a generator's proposed steps pass the verifier, asked at every prefix of held-out gold traces."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pcr_ray.core.trace import Step, parse_answer, parse_step, parse_trace
from pcr_ray.core.verifier import VerifierState, check_answer, verify, verify_step
from pcr_ray.generators.base import ProposalRequest


@dataclass
class StepValidity:
    """Counts over every proposal: parsed as a step or an answer, passing the verifier, the gold op."""

    requests: int = 0
    proposals: int = 0
    parsed: int = 0
    valid: int = 0
    answers: int = 0
    gold_op: int = 0
    seconds: float = 0.0
    reject_codes: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reject_codes"] = dict(self.reject_codes.most_common())
        d["valid_share"] = round(self.valid / self.proposals, 4) if self.proposals else None
        d["proposals_per_s"] = round(self.proposals / self.seconds, 3) if self.seconds else None
        d["valid_per_s"] = round(self.valid / self.seconds, 3) if self.seconds else None
        return d


def prefix_requests(problems: Sequence[Any], k: int) -> list[tuple[ProposalRequest, VerifierState, str]]:
    """A step request at every prefix of each problem's gold trace (with the state the verifier is in there and
    the gold op: '' where the answer is due)."""
    out = []
    for p in problems:
        trace, _ = parse_trace(p.gold_trace)
        verdict = verify(trace) if trace is not None else None
        if trace is None or verdict is None or not verdict.ok or len(trace.answer) != 1:
            continue
        state, _ = VerifierState.from_givens(trace.givens)
        done: list[Step] = []
        for step, res in zip(trace.steps, verdict.steps, strict=True):
            out.append((ProposalRequest(p.id, p.text, trace.givens, tuple(done), k=k,
                                        target_unit=trace.answer[0].unit), state, step.op))
            state = verify_step(state, step).state
            done.append(Step(step.op, dict(step.args), step.out, res.value))
        out.append((ProposalRequest(p.id, p.text, trace.givens, tuple(done), k=k, target_unit=trace.answer[0].unit),
                    state, ""))
    return out


def step_validity(generator: Any, problems: Sequence[Any], k: int = 4, batch: int = 16) -> StepValidity:
    """Propose k candidates at every gold prefix of `problems` and check each against the verifier."""
    items = prefix_requests(problems, k)
    m = StepValidity()
    t0 = time.perf_counter()
    for i in range(0, len(items), batch):
        chunk = items[i:i + batch]
        outs = generator.propose([req for req, _, _ in chunk])
        for (req, state, gold_op), cands in zip(chunk, outs, strict=True):
            m.requests += 1
            for text in cands:
                m.proposals += 1
                try:
                    obj = json.loads(text)
                except ValueError:
                    m.reject_codes["malformed"] += 1
                    continue
                if isinstance(obj, dict) and "answer" in obj:
                    answers = parse_answer(obj["answer"])
                    if answers is None:
                        m.reject_codes["malformed"] += 1
                        continue
                    m.parsed += 1
                    m.answers += 1
                    _, diags = check_answer(state, answers)
                    if diags:
                        m.reject_codes[diags[0].code] += 1
                    else:
                        m.valid += 1
                        m.gold_op += gold_op == ""
                    continue
                step = parse_step(obj, len(req.steps))
                if step is None:
                    m.reject_codes["malformed"] += 1
                    continue
                m.parsed += 1
                check = verify_step(state, step)
                if check.ok:
                    m.valid += 1
                    m.gold_op += step.op == gold_op
                elif check.diagnostic is not None:
                    m.reject_codes[check.diagnostic.code] += 1
    m.seconds = time.perf_counter() - t0
    return m
