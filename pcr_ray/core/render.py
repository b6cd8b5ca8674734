"""The one text rendering of (problem, givens, prefix) and of a candidate step, shared by training, scoring,
serving and search.

Compact on purpose (the PRM forward pass is the CPU's bottleneck): a step is
`d = kin_displacement(v0=v0, a=a, t=t) = 25 [m]` (the `= value` part only when the step carries a value, the
`[unit]` part only when it has units); givens are `name=value unit`; the context is
`problem text | givens: ... | steps: s1; s2; ...`. Numbers use at most 4 significant digits in values and 6 in
literals, so equal computations render equally.

Computed quantities are renamed the way the enumerator names them (`pcr_ray.core.naming`: dimension stem + step
number; givens keep their names), in the prefix, in the candidate step and in answer declarations
(`render_candidate`, `render_answer(..., names=...)`): a gold trace's `Q_warm` and a search's `E3` render
alike, so what the PRM learns from gold traces is what it sees at search time. `render_step` alone renders a
step as written (traces shown to people).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pcr_ray.core.naming import fresh_name
from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.trace import Answer, Given, Out, Step
from pcr_ray.core.units import try_unit_info

RENDER_VERSION = 2  # 2: computed quantities renamed canonically (1: names as written)

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


def render_answer(answer: Sequence[Answer | Mapping[str, Any]], values: Sequence[float | None] | None = None,
                  names: Mapping[str, str] | None = None) -> str:
    """`answer: name = value [unit]` for an answer declaration (values in the declared units), scored like a step;
    `names` (from `canonical_names` of the prefix) renames the declared quantities."""
    parts = []
    for i, a in enumerate(answer):
        name, unit = (a["name"], str(a.get("unit") or "")) if isinstance(a, Mapping) else (a.name, a.unit)
        name = (names or {}).get(name, name)
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


def _given_name(g: Given | Mapping[str, Any]) -> str:
    return str(g["name"]) if isinstance(g, Mapping) else g.name


def _dims(unit: str) -> Any:
    info = try_unit_info(unit or "dimensionless")
    return info.dims if info is not None else None


def canonical_names(givens: Sequence[Given | Mapping[str, Any]], prefix: Sequence[Step | Mapping[str, Any]]
                    ) -> dict[str, str]:
    """Each prefix step's output name -> its canonical name (`pcr_ray.core.naming.fresh_name` of its dimension and
    position, unique among the givens' names and earlier canonical names)."""
    taken = {_given_name(g) for g in givens}
    names: dict[str, str] = {}
    for i, s in enumerate(prefix):
        s = s if isinstance(s, Step) else step_from_dict(s)
        new = fresh_name(_dims(s.out.unit), i, taken)
        taken.add(new)
        names[s.out.name] = new
    return names


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def renamed_step(step: Step, names: Mapping[str, str], out_name: str | None = None) -> Step:
    """`step` with its variable arguments (and identifiers inside expression arguments) renamed by `names`, and
    its output named `out_name` (or renamed by `names`). Constant-name arguments stay as they are."""
    if not names and out_name is None:
        return step
    prim = REGISTRY.get(step.op)
    kinds = {p.name: p.kind for p in prim.params} if prim is not None else {}
    args: dict[str, Any] = {}
    for k, v in step.args.items():
        kind = kinds.get(k, "var")
        if isinstance(v, str) and kind == "var":
            v = names.get(v, v)
        elif isinstance(v, str) and kind == "expr":
            v = _IDENT.sub(lambda m: names.get(m.group(0), m.group(0)), v)
        args[k] = v
    out = Out(out_name if out_name is not None else names.get(step.out.name, step.out.name), step.out.unit)
    return Step(step.op, args, out, step.value)


def render_candidate(givens: Sequence[Given | Mapping[str, Any]], prefix: Sequence[Step | Mapping[str, Any]],
                     step: Step | Mapping[str, Any]) -> str:
    """The candidate step after `prefix`, as the PRM sees it: canonical names (see the module docstring)."""
    step = step if isinstance(step, Step) else step_from_dict(step)
    names = canonical_names(givens, prefix)
    taken = {_given_name(g) for g in givens} | set(names.values())
    return render_step(renamed_step(step, names, fresh_name(_dims(step.out.unit), len(prefix), taken)))


def render_context(problem_text: str, givens: Sequence[Given | Mapping[str, Any]],
                   prefix: Sequence[Step | Mapping[str, Any]]) -> str:
    """`problem | givens: g1; g2 | steps: s1; s2` (steps part omitted when the prefix is empty); the prefix's
    computed quantities carry their canonical names."""
    text = _WS.sub(" ", problem_text or "").strip()
    if len(text) > MAX_PROBLEM_CHARS:
        text = text[:MAX_PROBLEM_CHARS].rsplit(" ", 1)[0] + " ..."
    parts = [text] if text else []
    if givens:
        parts.append("givens: " + "; ".join(render_given(g) for g in givens))
    if prefix:
        steps = [s if isinstance(s, Step) else step_from_dict(s) for s in prefix]
        names = canonical_names(givens, steps)
        parts.append("steps: " + "; ".join(render_step(renamed_step(s, names)) for s in steps))
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
