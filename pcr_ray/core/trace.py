"""The trace DSL: Trace = (givens, steps, answer); JSON in/out; JSON Schema export for constrained decoding.

Parsing never raises on bad shapes: `parse_trace` returns (trace or None, list of shape errors), so the
verifier can turn every problem into a diagnostic. Schemas are generated from the primitive registry.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.primitives.registry import VARIADIC_MAX

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
ArgValue = str | float | int


@dataclass(frozen=True, slots=True)
class Given:
    """A known quantity of the problem: name, value in `unit`, and a short description."""

    name: str
    value: float
    unit: str = "dimensionless"
    desc: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "value": self.value, "unit": self.unit}
        if self.desc:
            d["desc"] = self.desc
        return d


@dataclass(frozen=True, slots=True)
class Out:
    """The variable a step defines: its name and declared unit."""

    name: str
    unit: str = "dimensionless"


@dataclass(frozen=True, slots=True)
class Step:
    """One application of a primitive: op(args) -> out, with an optional claimed value in out.unit."""

    op: str
    args: dict[str, ArgValue]
    out: Out
    value: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op, "args": dict(self.args),
                             "out": {"name": self.out.name, "unit": self.out.unit}}
        if self.value is not None:
            d["value"] = self.value
        return d


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer variable and the unit it is requested in."""

    name: str
    unit: str = "dimensionless"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit}


@dataclass(frozen=True, slots=True)
class Trace:
    """J = (givens, steps, answer)."""

    givens: tuple[Given, ...]
    steps: tuple[Step, ...] = ()
    answer: tuple[Answer, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "givens": [g.to_dict() for g in self.givens],
            "steps": [s.to_dict() for s in self.steps],
            "answer": [a.to_dict() for a in self.answer],
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def with_steps(self, steps: tuple[Step, ...] | list[Step], answer: tuple[Answer, ...] | None = None) -> Trace:
        return Trace(self.givens, tuple(steps), self.answer if answer is None else tuple(answer))


@dataclass(frozen=True, slots=True)
class ShapeError:
    """Where and why a JSON object is not a trace (path like 'steps[2].args')."""

    path: str
    message: str
    step: int | None = None
    code: str = "malformed"


@dataclass(slots=True)
class ParseContext:
    """Shape errors collected while a trace is parsed (each with its path, message and step)."""

    errors: list[ShapeError] = field(default_factory=list)

    def err(self, path: str, msg: str, step: int | None = None, code: str = "malformed") -> None:
        self.errors.append(ShapeError(path, msg, step, code))


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _number(ctx: ParseContext, x: Any, path: str, step: int | None = None) -> float | None:
    if not _is_number(x):
        ctx.err(path, f"expected a number, got {type(x).__name__}", step)
        return None
    try:
        v = float(x)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        ctx.err(path, f"non-finite number {x!r}", step, code="non_finite")
        return None
    return v


def _unit(ctx: ParseContext, x: Any, path: str, step: int | None = None) -> str | None:
    if x is None:
        return "dimensionless"
    if not isinstance(x, str):
        ctx.err(path, f"unit must be a string, got {type(x).__name__}", step)
        return None
    return x.strip() or "dimensionless"


def _name(ctx: ParseContext, x: Any, path: str, step: int | None = None) -> str | None:
    if not isinstance(x, str):
        ctx.err(path, f"name must be a string, got {type(x).__name__}", step)
        return None
    if not NAME_RE.match(x):
        ctx.err(path, f"bad variable name {x!r} (letters, digits, underscore; not starting with a digit)", step,
                "bad_name")
        return None
    return x


def _parse_given(ctx: ParseContext, g: Any, i: int) -> Given | None:
    p = f"givens[{i}]"
    if not isinstance(g, dict):
        ctx.err(p, f"a given must be an object, got {type(g).__name__}")
        return None
    n0 = len(ctx.errors)
    name = _name(ctx, g.get("name"), p + ".name")
    value = _number(ctx, g.get("value"), p + ".value")
    unit = _unit(ctx, g.get("unit"), p + ".unit")
    desc = g.get("desc", "")
    if not isinstance(desc, str):
        desc = str(desc)
    if len(ctx.errors) > n0:
        return None
    return Given(name, value, unit, desc)  # type: ignore[arg-type]


def parse_step(obj: Any, index: int = 0, ctx: ParseContext | None = None) -> Step | None:
    """One step from a JSON-like object; shape errors go to `ctx` (or are dropped)."""
    ctx = ctx if ctx is not None else ParseContext()
    p = f"steps[{index}]"
    if not isinstance(obj, dict):
        ctx.err(p, f"a step must be an object, got {type(obj).__name__}", index)
        return None
    n0 = len(ctx.errors)
    op = obj.get("op")
    if not isinstance(op, str) or not op:
        ctx.err(p + ".op", "missing or non-string 'op'", index)
    args = obj.get("args", {})
    clean_args: dict[str, ArgValue] = {}
    if not isinstance(args, dict):
        ctx.err(p + ".args", f"'args' must be an object, got {type(args).__name__}", index)
    else:
        for k, v in args.items():
            if isinstance(v, str):
                clean_args[str(k)] = v
            elif _is_number(v):
                num = _number(ctx, v, f"{p}.args.{k}", index)
                if num is not None:
                    clean_args[str(k)] = int(v) if isinstance(v, int) and abs(v) < 2**53 else num
            else:
                ctx.err(f"{p}.args.{k}", f"an argument is a variable name or a number, got {type(v).__name__}", index)
    out = obj.get("out")
    out_obj = None
    if isinstance(out, dict):
        name = _name(ctx, out.get("name"), p + ".out.name", index)
        unit = _unit(ctx, out.get("unit"), p + ".out.unit", index)
        if name is not None and unit is not None:
            out_obj = Out(name, unit)
    elif isinstance(out, str):  # shorthand "out": "d" means a dimensionless result named d
        name = _name(ctx, out, p + ".out", index)
        out_obj = Out(name, "dimensionless") if name else None
    else:
        ctx.err(p + ".out", "missing 'out' object with 'name' and 'unit'", index)
    value = obj.get("value")
    val = None
    if value is not None:
        val = _number(ctx, value, p + ".value", index)
    extra = set(obj) - {"op", "args", "out", "value", "note", "desc"}
    if extra:
        ctx.err(p, f"unknown step field(s) {sorted(extra)}", index)
    if len(ctx.errors) > n0 or out_obj is None:
        return None
    return Step(op, clean_args, out_obj, val)  # type: ignore[arg-type]


def parse_answer(obj: Any, ctx: ParseContext | None = None) -> tuple[Answer, ...] | None:
    """The answer list (or a single answer object / bare name)."""
    ctx = ctx if ctx is not None else ParseContext()
    if isinstance(obj, (dict, str)):
        obj = [obj]
    if not isinstance(obj, list):
        ctx.err("answer", f"'answer' must be a list of {{name, unit}}, got {type(obj).__name__}")
        return None
    out: list[Answer] = []
    n0 = len(ctx.errors)
    for i, a in enumerate(obj):
        if isinstance(a, str):
            name = _name(ctx, a, f"answer[{i}]")
            if name:
                out.append(Answer(name, ""))
            continue
        if not isinstance(a, dict):
            ctx.err(f"answer[{i}]", f"an answer must be an object, got {type(a).__name__}")
            continue
        name = _name(ctx, a.get("name"), f"answer[{i}].name")
        unit = _unit(ctx, a.get("unit", ""), f"answer[{i}].unit") if a.get("unit", "") != "" else ""
        if name is not None and unit is not None:
            out.append(Answer(name, unit))
    return tuple(out) if len(ctx.errors) == n0 else None


def parse_trace(obj: Any) -> tuple[Trace | None, list[ShapeError]]:
    """A Trace from JSON text or a JSON-like object; (None, errors) when the shape is wrong."""
    ctx = ParseContext()
    if isinstance(obj, Trace):
        return obj, []
    if isinstance(obj, (str, bytes)):
        try:
            obj = json.loads(obj)
        except (ValueError, RecursionError) as exc:
            return None, [ShapeError("$", f"not valid JSON: {exc}".splitlines()[0])]
    if not isinstance(obj, dict):
        return None, [ShapeError("$", f"a trace must be an object, got {type(obj).__name__}")]
    unknown = set(obj) - {"givens", "steps", "answer", "problem", "id", "meta"}
    if unknown:
        ctx.err("$", f"unknown trace field(s) {sorted(unknown)}")
    givens_raw = obj.get("givens", [])
    givens: list[Given] = []
    if not isinstance(givens_raw, list):
        ctx.err("givens", f"'givens' must be a list, got {type(givens_raw).__name__}")
    else:
        for i, g in enumerate(givens_raw):
            pg = _parse_given(ctx, g, i)
            if pg:
                givens.append(pg)
    steps_raw = obj.get("steps", [])
    steps: list[Step] = []
    if not isinstance(steps_raw, list):
        ctx.err("steps", f"'steps' must be a list, got {type(steps_raw).__name__}")
    else:
        for i, s in enumerate(steps_raw):
            ps = parse_step(s, i, ctx)
            if ps:
                steps.append(ps)
    answer = parse_answer(obj.get("answer", []), ctx)
    if ctx.errors:
        return None, ctx.errors
    return Trace(tuple(givens), tuple(steps), answer or ()), []


def load_trace(path: str) -> tuple[Trace | None, list[ShapeError]]:
    """Read a trace from a JSON file path; file errors become shape errors too."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        return None, [ShapeError("$", f"cannot read {path}: {exc.strerror}")]
    return parse_trace(text)


def dump_trace(trace: Trace, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(trace.to_json(indent=2))


# ---------------------------------------------------------------- JSON Schema (from the registry)

_NAME_SCHEMA = {"type": "string", "pattern": NAME_RE.pattern}
_UNIT_SCHEMA = {"type": "string", "maxLength": 64}


def _answer_items_schema() -> dict[str, Any]:
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "properties": {"name": _NAME_SCHEMA, "unit": _UNIT_SCHEMA},
            "required": ["name", "unit"],
            "additionalProperties": False,
        },
    }


def _op_step_schema(prim: Any) -> dict[str, Any]:
    props: dict[str, Any] = {}
    if prim.variadic:  # x1..x8, at least x1 and x2

        var = {"anyOf": [_NAME_SCHEMA, {"type": "number"}]}
        props = {f"x{i}": var for i in range(1, VARIADIC_MAX + 1)}
        return _step_object(prim.name, props, ["x1", "x2"])
    for p in prim.params:
        if p.kind == "name":
            props[p.name] = {"type": "string", "enum": list(p.choices)} if p.choices else {"type": "string"}
        elif p.kind == "expr":
            props[p.name] = {"type": "string", "maxLength": 200}
        else:
            props[p.name] = {"anyOf": [_NAME_SCHEMA, {"type": "number"}]}
    return _step_object(prim.name, props, [p.name for p in prim.params])


def _step_object(op: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "op": {"const": op},
            "args": {"type": "object", "properties": props, "required": required, "additionalProperties": False},
            "out": {"type": "object", "properties": {"name": _NAME_SCHEMA, "unit": _UNIT_SCHEMA},
                    "required": ["name", "unit"], "additionalProperties": False},
            "value": {"type": "number"},
        },
        "required": ["op", "args", "out"],
        "additionalProperties": False,
    }


def step_json_schema(ops: list[str] | None = None, include_answer: bool = True) -> dict[str, Any]:
    """JSON Schema of one generator output: a step of a registered op, or a final answer declaration.

    `ops` restricts the op enum (smaller grammars for constrained decoding); default: every primitive.
    """
    names = sorted(REGISTRY) if ops is None else [o for o in ops if o in REGISTRY]
    alts: list[dict[str, Any]] = [_op_step_schema(REGISTRY[n]) for n in names]
    if include_answer:
        alts.append({"type": "object", "properties": {"answer": _answer_items_schema()}, "required": ["answer"],
                     "additionalProperties": False})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "pcr_ray step", "anyOf": alts}


def trace_json_schema(ops: list[str] | None = None) -> dict[str, Any]:
    """JSON Schema of a whole trace (givens, steps over registered ops, answer)."""
    step = step_json_schema(ops, include_answer=False)
    step.pop("$schema", None)
    step.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pcr_ray trace",
        "type": "object",
        "properties": {
            "givens": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": _NAME_SCHEMA, "value": {"type": "number"}, "unit": _UNIT_SCHEMA,
                                   "desc": {"type": "string"}},
                    "required": ["name", "value", "unit"],
                    "additionalProperties": False,
                },
            },
            "steps": {"type": "array", "items": step},
            "answer": _answer_items_schema(),
        },
        "required": ["givens", "steps", "answer"],
        "additionalProperties": False,
    }
