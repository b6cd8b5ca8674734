"""Every prompt the LLM generators send, in one place; op lists are read from the primitive registry."""

from __future__ import annotations

from collections.abc import Sequence

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.trace import Given, Out, Step
from pcr_ray.generators.base import ProposalRequest

Message = dict[str, str]

STEP_SYSTEM = (
    "You solve quantitative problems as a trace of typed steps. A step applies ONE op from the list to "
    "variables defined earlier (givens or earlier steps) or to plain numbers (only where a dimensionless "
    "number fits), and defines a NEW variable with its unit. Reply with exactly one JSON object: either the "
    'next step {"op": OP, "args": {PARAM: VARIABLE_OR_NUMBER, ...}, "out": {"name": NEW_NAME, "unit": UNIT}} '
    'or, once a variable holds the answer, {"answer": [{"name": VARIABLE, "unit": UNIT}]}. Units are strings '
    "such as m, m/s, m/s^2, kg, N, J, s, USD, item. Physical constants come from the op const by name."
)

# For a model fine-tuned on the trace format (`pcr-ray sft`): no op list, no worked example.
COMPACT_STEP_SYSTEM = ("Write the next step of the trace, or the answer declaration once a variable holds the "
                       "answer, as one JSON object.")
PROMPTS = ("full", "compact")

FULL_SYSTEM = (
    "You solve quantitative problems as a trace of typed steps. Each step applies ONE op from the list to "
    "earlier variables (or to dimensionless numbers) and defines a new variable with its unit. Reply with "
    'one JSON object {"steps": [STEP, ...], "answer": [{"name": VARIABLE, "unit": UNIT}]} where a STEP is '
    '{"op": OP, "args": {PARAM: VARIABLE_OR_NUMBER}, "out": {"name": NEW_NAME, "unit": UNIT}}.'
)

PYTHON_SYSTEM = (
    "You solve math and physics word problems by writing a short Python program. The program must print "
    "the final numeric answer on its last line, optionally followed by its unit, e.g. `print(25, 'm')`. "
    "Use only the standard library. Reply with the program in one ```python block and nothing else."
)

DIRECT_SYSTEM = (
    "You solve math and physics word problems. Think briefly, then end your reply with a line of the form "
    "'answer: NUMBER UNIT' (UNIT may be empty for a pure number)."
)

GIVENS_SYSTEM = (
    "You read a word problem and list its known quantities. Reply with one JSON object "
    '{"givens": [{"name": SHORT_NAME, "value": NUMBER, "unit": UNIT, "desc": FEW_WORDS}], '
    '"target": {"unit": UNIT_OF_THE_ASKED_QUANTITY, "desc": FEW_WORDS}}. Use SI-style unit strings '
    "(m, s, m/s, m/s^2, kg, N, J, W, USD, item, dimensionless); write percentages as fractions with unit "
    "dimensionless."
)

EXAMPLE_PROBLEM = "A cart starts from rest and accelerates at 2 m/s^2 for 5 s. How far does it travel?"
EXAMPLE_GIVENS = (Given("a", 2.0, "m/s^2", "acceleration"), Given("t", 5.0, "s", "duration"))
EXAMPLE_STEPS = (
    Step("mul", {"x": "a", "y": "t"}, Out("at", "m/s"), 10.0),
)
EXAMPLE_NEXT = '{"op": "mul", "args": {"x": "at", "y": "t"}, "out": {"name": "at2", "unit": "m"}}'


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.6g}"


def op_lines(ops: Sequence[str] | None = None) -> list[str]:
    """One line per op: signature, formula and description (the registry is the source)."""
    names = sorted(REGISTRY) if ops is None else [o for o in ops if o in REGISTRY]
    lines = []
    for n in names:
        p = REGISTRY[n]
        lines.append(f"- {p.signature()}: {p.description}")
    return lines


def givens_block(givens: Sequence[Given]) -> str:
    if not givens:
        return "Givens: (none)"
    rows = [f"- {g.name} = {_fmt(g.value)} {g.unit}" + (f"  ({g.desc})" if g.desc else "") for g in givens]
    return "Givens:\n" + "\n".join(rows)


def steps_block(steps: Sequence[Step]) -> str:
    if not steps:
        return "Steps so far: (none)"
    rows = []
    for i, s in enumerate(steps):
        call = ", ".join(f"{k}={v}" for k, v in s.args.items())
        rows.append(f"[{i}] {s.out.name} = {s.op}({call}) = {_fmt(s.value)} {s.out.unit}")
    return "Steps so far:\n" + "\n".join(rows)


def step_user_message(req: ProposalRequest, ops: Sequence[str] | None = None) -> str:
    parts = ["Ops you may use:\n" + "\n".join(op_lines(ops))] if ops is not None else []
    parts += [f"Problem: {req.problem_text.strip()}", givens_block(req.givens), steps_block(req.steps)]
    if req.target_unit:
        parts.append(f"The answer is asked in {req.target_unit}.")
    if req.feedback:
        parts.append("Your previous attempts were rejected by the verifier:\n"
                     + "\n".join(f"- {f}" for f in req.feedback) + "\nFix the problem.")
    parts.append("Next step or answer, as one JSON object:")
    return "\n".join(parts)


def step_messages(req: ProposalRequest, ops: Sequence[str] | None = None, *, few_shot: bool = True,
                  prompt: str = "full") -> list[Message]:
    """Chat messages asking for the next step (or the answer declaration) of `req`.

    The system prompt and the worked example are the same for every request (a backend can reuse their
    KV cache); the op list, which depends on the variables at hand, comes with the request's own message.
    prompt='compact' (a model fine-tuned on traces) sends the problem, givens and steps alone.
    """
    if prompt == "compact":
        return [{"role": "system", "content": COMPACT_STEP_SYSTEM},
                {"role": "user", "content": step_user_message(req, None)}]
    msgs: list[Message] = [{"role": "system", "content": STEP_SYSTEM}]
    if few_shot:
        ex = ProposalRequest("example", EXAMPLE_PROBLEM, EXAMPLE_GIVENS, EXAMPLE_STEPS, target_unit="m")
        msgs += [{"role": "user", "content": step_user_message(ex, ["mul", "div", "kin_displacement"])},
                 {"role": "assistant", "content": EXAMPLE_NEXT}]
    msgs.append({"role": "user", "content": step_user_message(req, sorted(REGISTRY) if ops is None else ops)})
    return msgs


def full_messages(req: ProposalRequest, ops: Sequence[str] | None = None, prompt: str = "full") -> list[Message]:
    """Chat messages asking for a whole trace (steps and answer) over the request's givens; prompt='compact'
    (a model fine-tuned on traces) leaves out the op list."""
    user = [] if prompt == "compact" else ["Ops you may use:\n" + "\n".join(op_lines(ops))]
    user += [f"Problem: {req.problem_text.strip()}", givens_block(req.givens)]
    if req.target_unit:
        user.append(f"The answer is asked in {req.target_unit}.")
    user.append("The whole solution, as one JSON object:")
    return [{"role": "system", "content": FULL_SYSTEM}, {"role": "user", "content": "\n".join(user)}]


def python_messages(req: ProposalRequest) -> list[Message]:
    """Chat messages asking for a Python program that prints the answer (ToRA-style baseline)."""
    user = f"Problem: {req.problem_text.strip()}"
    if req.feedback:
        user += "\nThe previous program failed:\n" + "\n".join(f"- {f}" for f in req.feedback)
    return [{"role": "system", "content": PYTHON_SYSTEM}, {"role": "user", "content": user}]


def direct_messages(req: ProposalRequest) -> list[Message]:
    """Chat messages asking for the answer directly (no tools)."""
    return [{"role": "system", "content": DIRECT_SYSTEM},
            {"role": "user", "content": f"Problem: {req.problem_text.strip()}"}]


def givens_messages(req: ProposalRequest) -> list[Message]:
    """Chat messages asking for the givens and the target unit of a problem text."""
    return [{"role": "system", "content": GIVENS_SYSTEM},
            {"role": "user", "content": f"Problem: {EXAMPLE_PROBLEM}"},
            {"role": "assistant", "content": '{"givens": [{"name": "v0", "value": 0, "unit": "m/s", "desc": '
                                             '"starts from rest"}, {"name": "a", "value": 2, "unit": "m/s^2", '
                                             '"desc": "acceleration"}, {"name": "t", "value": 5, "unit": "s", '
                                             '"desc": "duration"}], "target": {"unit": "m", "desc": "distance"}}'},
            {"role": "user", "content": f"Problem: {req.problem_text.strip()}"}]


def messages_for(req: ProposalRequest, ops: Sequence[str] | None = None, prompt: str = "full") -> list[Message]:
    """The messages for any request mode (`prompt`, 'full' or 'compact', applies to steps and whole traces)."""
    if prompt not in PROMPTS:
        raise ValueError(f"prompt must be one of {PROMPTS}, got {prompt!r}")
    if req.mode == "step":
        return step_messages(req, ops, prompt=prompt)
    if req.mode == "full":
        return full_messages(req, ops, prompt=prompt)
    if req.mode == "python":
        return python_messages(req)
    if req.mode == "direct":
        return direct_messages(req)
    return givens_messages(req)
