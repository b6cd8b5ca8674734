"""The one text rendering of (problem, givens, prefix) and of a candidate step, shared by training, scoring,
serving and search.

Compact on purpose (the PRM forward pass is the CPU's bottleneck): a step is
`d = kin_displacement(v0=v0, a=a, t=t) = 25 [m]` (the `= value` part only when the step carries a value, the
`[unit]` part only when it has units); givens are `name=value unit`; the context is
`problem text | givens: ... | steps: s1; s2; ...`. Numbers use at most 4 significant digits in values and 6 in
literals, so equal computations render equally.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pcr_ray.trace import Answer, Given, Out, Step

_DIMLESS = ("", "dimensionless", "1")
_WS = re.compile(r"\s+")
MAX_PROBLEM_CHARS = 600


def fmt_value(x: float | int | None, digits: int = 4) -> str:
    """A number with `digits` significant digits, no trailing zeros ('25', '0.2', '1.235e+06')."""
    if x is None:
        return "?"
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    return f"{x:.{digits}g}"


def _unit(unit: str) -> str:
    return "" if unit.strip() in _DIMLESS else unit.strip()


def _arg(a: Any) -> str:
    return a if isinstance(a, str) else fmt_value(a, 6)


def render_step(step: Step | Mapping[str, Any]) -> str:
    """`out = op(k=v, ...) = value [unit]` for one step (a Step or its JSON dict)."""
    if not isinstance(step, Step):
        step = step_from_dict(step)
    args = ", ".join(f"{k}={_arg(v)}" for k, v in step.args.items())
    text = f"{step.out.name} = {step.op}({args})"
    if step.value is not None:
        text += f" = {fmt_value(step.value)}"
    u = _unit(step.out.unit)
    if u:
        text += f" [{u}]"
    return text


def render_answer(answer: Sequence[Answer | Mapping[str, Any]], values: Sequence[float | None] | None = None) -> str:
    """`answer: name = value [unit]` for an answer declaration (values in the declared units), scored like a step."""
    parts = []
    for i, a in enumerate(answer):
        name, unit = (a["name"], str(a.get("unit") or "")) if isinstance(a, Mapping) else (a.name, a.unit)
        v = values[i] if values is not None and i < len(values) else None
        text = name if v is None else f"{name} = {fmt_value(v)}"
        u = _unit(unit)
        parts.append(text + (f" [{u}]" if u else ""))
    return "answer: " + "; ".join(parts)


def render_given(g: Given | Mapping[str, Any]) -> str:
    """`name=value unit` (no description: the problem text carries it)."""
    if isinstance(g, Mapping):
        name, value, unit = g["name"], g["value"], str(g.get("unit") or "")
    else:
        name, value, unit = g.name, g.value, g.unit
    u = _unit(unit)
    return f"{name}={fmt_value(value, 6)}" + (f" {u}" if u else "")


def render_context(problem_text: str, givens: Sequence[Given | Mapping[str, Any]],
                   prefix: Sequence[Step | Mapping[str, Any]]) -> str:
    """`problem | givens: g1; g2 | steps: s1; s2` (steps part omitted when the prefix is empty)."""
    text = _WS.sub(" ", problem_text or "").strip()
    if len(text) > MAX_PROBLEM_CHARS:
        text = text[:MAX_PROBLEM_CHARS].rsplit(" ", 1)[0] + " ..."
    parts = [text] if text else []
    if givens:
        parts.append("givens: " + "; ".join(render_given(g) for g in givens))
    if prefix:
        parts.append("steps: " + "; ".join(render_step(s) for s in prefix))
    return " | ".join(parts)


def step_from_dict(d: Mapping[str, Any]) -> Step:
    """A Step from its JSON dict (the shape Step.to_dict writes); raises ValueError on a bad shape."""
    try:
        out = d["out"]
        o = Out(out["name"], out.get("unit") or "dimensionless") if isinstance(out, Mapping) else Out(str(out))
        v = d.get("value")
        return Step(str(d["op"]), dict(d.get("args") or {}), o, None if v is None else float(v))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a step: {exc!r}") from None


def step_with_value(step: Step, value: float | None) -> Step:
    """The same step carrying `value` (e.g. the verifier's recomputed value) so that it renders with it."""
    return Step(step.op, dict(step.args), step.out, None if value is None else float(value))
