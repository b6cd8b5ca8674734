"""Per-request JSON Schemas for constrained decoding, op relevance, and JSON extraction from raw model text.

`step_json_schema()` over every primitive is a large grammar; a request only needs the ops whose parameter
dimensions the variables at hand can satisfy (`satisfiable_ops`). `request_schema` narrows further by
level: 'ops' (op enum only), 'names' (arguments and answers limited to defined variable names or numbers).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pcr_ray.core.primitives import REGISTRY, Primitive
from pcr_ray.core.primitives.registry import EXACT
from pcr_ray.core.temperature import checks_op, given_role, step_role
from pcr_ray.core.trace import Given, Step, step_json_schema
from pcr_ray.core.units import DIMENSIONLESS, Dims, try_unit_info

SCHEMA_LEVELS = ("ops", "names")
# Tighter than the trace schema's (a subset of it): small grammars decode faster and cannot ramble.
SHORT_NAME = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,11}$"}
SHORT_UNIT = {"type": "string", "maxLength": 20}


@dataclass(frozen=True, slots=True)
class VarInfo:
    """A variable visible to a step: name, declared unit, dimension vector, and value in that unit if known."""

    name: str
    unit: str
    dims: Dims | None
    value: float | None = None
    is_given: bool = False
    temp: str = ""  # temperature role: 'reading', 'change' or '' (pcr_ray.core.temperature)


def visible_vars(givens: Sequence[Given], steps: Sequence[Step]) -> list[VarInfo]:
    """Givens then step outputs, in order; dims None where the unit string does not parse."""
    out: list[VarInfo] = []
    roles: dict[str, str] = {}
    for g in givens:
        u = try_unit_info(g.unit)
        if g.name not in roles:
            roles[g.name] = given_role(g.unit)
            out.append(VarInfo(g.name, g.unit, u.dims if u else None, float(g.value), True, roles[g.name]))
    for s in steps:
        u = try_unit_info(s.out.unit)
        if s.out.name not in roles:
            roles[s.out.name] = step_role(s.op, s.args, lambda n: roles.get(n, ""))[0] if checks_op(s.op) else ""
            out.append(VarInfo(s.out.name, s.out.unit, u.dims if u else None, s.value, False, roles[s.out.name]))
    return out


def has_expr_param(prim: Primitive) -> bool:
    return any(p.kind == "expr" for p in prim.params)


def satisfiable(prim: Primitive, dims_available: set[Dims]) -> bool:
    """Whether every exact-dimension parameter of `prim` has a variable of that dimension at hand.

    Dimensionless and free parameters can always take a literal, so only exact dimensions constrain.
    """
    return all(not (p.kind == "var" and p.rkind == EXACT and p.rdims not in dims_available) for p in prim.params)


def satisfiable_ops(variables: Iterable[VarInfo], *, include_expr: bool = True,
                    ops: Sequence[str] | None = None) -> list[str]:
    """Names of the registered ops (sorted) whose exact-dimension parameters the variables can fill."""
    dims = {v.dims for v in variables if v.dims is not None}
    dims.add(DIMENSIONLESS)
    names = sorted(REGISTRY) if ops is None else [o for o in ops if o in REGISTRY]
    return [n for n in names if satisfiable(REGISTRY[n], dims) and (include_expr or not has_expr_param(REGISTRY[n]))]


def request_schema(variables: Sequence[VarInfo], *, level: str = "ops", ops: Sequence[str] | None = None,
                   include_answer: bool = True) -> dict[str, Any]:
    """The step/answer schema for one request, narrowed to the relevant ops (and, at level 'names', names)."""
    if level not in SCHEMA_LEVELS:
        raise ValueError(f"schema level must be one of {SCHEMA_LEVELS}, got {level!r}")
    op_names = satisfiable_ops(variables, ops=ops)
    schema = copy.deepcopy(step_json_schema(ops=op_names, include_answer=include_answer))
    names = [v.name for v in variables]
    by_names = level == "names" and bool(names)
    arg_schema = {"anyOf": [{"type": "string", "enum": names} if by_names else SHORT_NAME, {"type": "number"}]}
    for alt in schema["anyOf"]:
        props = alt["properties"]
        if "answer" in props:
            props["answer"]["maxItems"] = 1
            item = props["answer"]["items"]["properties"]
            item["name"] = {"type": "string", "enum": names} if by_names else SHORT_NAME
            item["unit"] = SHORT_UNIT
            continue
        props["out"]["properties"] = {"name": SHORT_NAME, "unit": SHORT_UNIT}
        prim = REGISTRY[props["op"]["const"]]
        kinds = {p.name: p.kind for p in prim.params}
        for pname, pschema in props["args"]["properties"].items():
            if kinds.get(pname, "var") == "var" and "anyOf" in pschema:
                props["args"]["properties"][pname] = arg_schema
    return schema


def full_trace_schema(variables: Sequence[VarInfo], *, level: str = "ops",
                      ops: Sequence[str] | None = None) -> dict[str, Any]:
    """Schema of a whole solution {steps: [...], answer: [...]} (givens are ours, not the model's)."""
    step = request_schema(variables, level=level, ops=ops, include_answer=False)
    step.pop("$schema", None)
    step.pop("title", None)
    answer = {"type": "array", "minItems": 1, "items": {
        "type": "object", "properties": {"name": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["name", "unit"], "additionalProperties": False}}
    return {"type": "object", "properties": {"steps": {"type": "array", "items": step, "maxItems": 12},
                                             "answer": answer},
            "required": ["steps", "answer"], "additionalProperties": False}


def givens_schema() -> dict[str, Any]:
    """Schema of an LLM givens extraction: {givens: [{name, value, unit, desc}], target: {unit, desc}}."""
    return {
        "type": "object",
        "properties": {
            "givens": {"type": "array", "maxItems": 12, "items": {
                "type": "object",
                "properties": {"name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,15}$"},
                               "value": {"type": "number"}, "unit": {"type": "string", "maxLength": 24},
                               "desc": {"type": "string", "maxLength": 40}},
                "required": ["name", "value", "unit", "desc"], "additionalProperties": False}},
            "target": {"type": "object", "properties": {"unit": {"type": "string", "maxLength": 24},
                                                        "desc": {"type": "string", "maxLength": 40}},
                       "required": ["unit", "desc"], "additionalProperties": False},
        },
        "required": ["givens", "target"],
        "additionalProperties": False,
    }


_FENCE = re.compile(r"```(?:json|python|py)?\s*\n?(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object in `text` (a fenced block or the first balanced {...}); raises ValueError."""
    s = text.strip()
    try:
        return json.loads(s)
    except ValueError:
        pass
    for m in _FENCE.finditer(s):
        try:
            return json.loads(m.group(1))
        except ValueError:
            continue
    dec = json.JSONDecoder()
    for i, ch in enumerate(s):
        if ch == "{":
            try:
                obj, _ = dec.raw_decode(s, i)
                return obj
            except ValueError:
                continue
    raise ValueError("no JSON object in the model output")


def extract_code(text: str) -> str:
    """The Python program in a model answer: the first fenced block, else the whole text."""
    m = _FENCE.search(text)
    return (m.group(1) if m else text).strip()
