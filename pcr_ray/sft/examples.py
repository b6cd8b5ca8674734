"""Gold traces as fine-tuning examples, in the output format of each method: DSL steps, a whole trace, a program,
an answer.

A step example is exactly the request the search sends at that point of the trace (the compact prompt: problem,
givens, steps so far with their values, the asked unit) and the gold next step as compact JSON, or the answer
declaration after the last step. A trace example is best-of-n's request (problem, givens, asked unit) and the
whole trace, its steps without values (the verifier computes them). A program example is the ToRA-style prompt
and the trace's Python program (pcr_ray.sft.programs); a direct example is the direct prompt and `answer: VALUE UNIT`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pcr_ray.core.trace import Step, parse_trace
from pcr_ray.core.verifier import verify
from pcr_ray.data.problem import Problem
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.prompts import Message, direct_messages, full_messages, python_messages, step_messages
from pcr_ray.sft.programs import trace_program

FORMATS = ("step", "trace", "python", "direct")


@dataclass(frozen=True)
class SFTExample:
    """One training example: chat messages, the assistant's target text, its format and problem."""

    problem_id: str
    fmt: str
    messages: tuple[Message, ...]
    target: str


def _compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _unit_text(unit: str) -> str:
    return "" if unit in ("", "dimensionless") else unit


def _step_target(step: Step) -> dict:
    """A step as the model writes it: op, args and the output's name and unit (no value)."""
    return {"op": step.op, "args": dict(step.args), "out": {"name": step.out.name, "unit": step.out.unit}}


def problem_examples(problem_id: str, text: str, gold_trace: dict, formats: Sequence[str] = FORMATS
                     ) -> list[SFTExample]:
    """Every example of one problem with a valid gold trace (none when it does not verify)."""
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown SFT formats {sorted(unknown)}; known: {FORMATS}")
    trace, _ = parse_trace(gold_trace)
    if trace is None or len(trace.answer) != 1:
        return []
    verdict = verify(trace)
    if not verdict.ok:
        return []
    target_unit = trace.answer[0].unit
    out: list[SFTExample] = []
    if "step" in formats:
        done: list[Step] = []
        for step, result in zip(trace.steps, verdict.steps, strict=True):
            req = ProposalRequest(problem_id, text, trace.givens, tuple(done), target_unit=target_unit)
            out.append(SFTExample(problem_id, "step", tuple(step_messages(req, prompt="compact")),
                                  _compact(_step_target(step))))
            done.append(Step(step.op, dict(step.args), step.out, result.value))
        req = ProposalRequest(problem_id, text, trace.givens, tuple(done), target_unit=target_unit)
        answer = {"answer": [{"name": a.name, "unit": a.unit} for a in trace.answer]}
        out.append(SFTExample(problem_id, "step", tuple(step_messages(req, prompt="compact")), _compact(answer)))
    if "trace" in formats:
        req = ProposalRequest(problem_id, text, trace.givens, mode="full", target_unit=target_unit)
        whole = {"steps": [_step_target(s) for s in trace.steps],
                 "answer": [{"name": a.name, "unit": a.unit} for a in trace.answer]}
        out.append(SFTExample(problem_id, "trace", tuple(full_messages(req, prompt="compact")), _compact(whole)))
    base = ProposalRequest(problem_id, text, mode="python")
    if "python" in formats:
        program = trace_program(trace).program
        if program is not None:
            out.append(SFTExample(problem_id, "python", tuple(python_messages(base)),
                                  f"```python\n{program}```"))
    if "direct" in formats:
        value = verdict.answer[0].value
        out.append(SFTExample(problem_id, "direct", tuple(direct_messages(base)),
                              f"answer: {value:.6g} {_unit_text(target_unit)}".rstrip()))
    return out


def corpus_examples(problems: Iterable[Problem], formats: Sequence[str] = FORMATS) -> list[SFTExample]:
    """The examples of every problem that has a gold trace."""
    out: list[SFTExample] = []
    for p in problems:
        if p.gold_trace:
            out.extend(problem_examples(p.id, p.text, p.gold_trace, formats))
    return out
