"""A gold trace as a stand-alone Python program that prints its answer with the unit (ToRA-style targets).

Each op's formula string is turned into a Python expression once (SymPy parses it; the parse is accepted only
where it matches the op's own implementation at random points), givens become SI floats, constants their SI
values, and the answer is converted into the asked unit. An op whose formula does not translate makes the
trace untranslatable (`TraceProgram.program` is None, with the reason): it is left out of the Python targets.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from functools import cache

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.primitives.constants import CONSTANTS, constant_base_value
from pcr_ray.core.trace import Trace, parse_trace
from pcr_ray.core.units import unit_info
from pcr_ray.core.verifier import verify

# Variadic ops: how their N arguments combine.
_VARIADIC = {"sum": " + ", "series_resistance": " + ", "parallel_capacitance": " + ", "product": " * "}
_RECIPROCAL = ("parallel_resistance", "series_capacitance")
_MEAN = ("mean",)
# Symbols a formula writes for a parameter of another name.
_ALIASES = {"dT": ("delta_t",), "L": ("length", "latent"), "lam": ("lam",), "f": ("focal",)}


@dataclass(frozen=True)
class TraceProgram:
    """A gold trace's program (None when an op does not translate) and why not."""

    program: str | None
    reason: str = ""


def _symbols(formula: str) -> list[str]:
    return sorted(set(re.findall(r"[A-Za-z_][A-Za-z_0-9']*", formula)))


@cache
def op_expression(op: str) -> str | None:
    """A Python expression over the op's parameter names (math.* functions), or None if the formula does not
    translate into one that agrees with the op's implementation."""
    import sympy as sp  # heavy: sympy
    from sympy.parsing.sympy_parser import (  # heavy: sympy
        convert_xor,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    prim = REGISTRY.get(op)
    if prim is None or prim.variadic or op == "const" or any(p.kind != "var" for p in prim.params):
        return None
    formula = prim.formula
    if "=" in formula:
        formula = formula.split("=", 1)[1]
    if any(w in formula for w in ("smallest", "...", "shown", "declare", "[", " of ", " with ")):
        return None
    formula = re.sub(r"\|([^|]+)\|", r"Abs(\1)", formula)
    formula = re.sub(r"\blambda\b", "lam", formula)
    params = [p.name for p in prim.params]
    by_lower = {p.lower(): p for p in params}
    local: dict[str, object] = {"pi": sp.pi, "e": sp.E}
    for name in _symbols(formula):
        target = by_lower.get(name.lower()) or next((a for a in _ALIASES.get(name, ()) if a in params), None)
        if target is not None:
            local[name] = sp.Symbol(target)
    try:
        expr = parse_expr(formula, local_dict=local,
                          transformations=standard_transformations + (implicit_multiplication_application,
                                                                      convert_xor))
    except Exception:
        return None
    if {str(s) for s in expr.free_symbols} - set(params):
        return None
    code = sp.pycode(expr, fully_qualified_modules=True)
    if "math." not in code and "import" in code:
        return None
    rng = random.Random(op)
    agreed = 0
    for _ in range(40):
        args = {p: rng.uniform(0.1, 3.0) for p in params}
        try:
            want = prim.fn(**args)
        except Exception:
            continue  # outside the op's domain: draw again
        try:
            got = eval(code, {"math": math}, dict(args))  # noqa: S307 - our own registry's formula, not model output
        except Exception:
            return None
        if not math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12):
            return None
        agreed += 1
        if agreed == 4:
            return code
    return None


def _variadic_expression(op: str, names: list[str]) -> str | None:
    if op in _VARIADIC:
        return _VARIADIC[op].join(names)
    if op in _RECIPROCAL:
        return "1 / (" + " + ".join(f"1 / {n}" for n in names) + ")"
    if op in _MEAN:
        return f"({' + '.join(names)}) / {len(names)}"
    return None


def _py_name(name: str) -> str:
    out = re.sub(r"\W", "_", name)
    return out if out.isidentifier() and not out[0].isdigit() else f"v_{out}"


def _substitute(code: str, args: dict[str, str]) -> str:
    """An op expression with its parameter names replaced by the step's argument expressions."""
    return re.sub(r"(?<![.\w])[A-Za-z_][A-Za-z_0-9]*\b",
                  lambda m: f"({args[m.group(0)]})" if m.group(0) in args else m.group(0), code)


def _literal(x: float) -> str:
    return repr(float(x))


def trace_program(trace: Trace | dict) -> TraceProgram:
    """The program of a valid gold trace: givens in SI, one line per step, the answer printed in its unit."""
    parsed = trace if isinstance(trace, Trace) else parse_trace(trace)[0]
    if parsed is None:
        return TraceProgram(None, "not a trace")
    verdict = verify(parsed)
    if not verdict.ok:
        return TraceProgram(None, f"the gold trace does not verify: {verdict.first_failure}")
    lines = ["import math", ""]
    names: dict[str, str] = {}
    for g in parsed.givens:
        names[g.name] = _py_name(g.name)
        base = unit_info(g.unit).to_base(g.value)
        lines.append(f"{names[g.name]} = {_literal(base)}  # {g.value:g} {g.unit}")
    for step in parsed.steps:
        out = _py_name(step.out.name)
        if step.op == "const":
            cname = str(step.args.get("name"))
            if cname not in CONSTANTS:
                return TraceProgram(None, f"unknown constant {cname!r}")
            lines.append(f"{out} = {_literal(constant_base_value(cname))}  # {cname}")
            names[step.out.name] = out
            continue
        prim = REGISTRY[step.op]
        args: dict[str, str] = {}
        for k, v in step.args.items():
            if isinstance(v, str):
                if v not in names:
                    return TraceProgram(None, f"step {step.op}: unknown variable {v!r}")
                args[k] = names[v]
            else:
                args[k] = _literal(float(v))
        if prim.variadic:
            expr = _variadic_expression(step.op, [args[k] for k in sorted(args, key=lambda s: int(s[1:]))])
        else:
            code = op_expression(step.op)
            expr = None if code is None else _substitute(code, args)
        if expr is None:
            return TraceProgram(None, f"op {step.op} has no Python translation")
        lines.append(f"{out} = {expr}  # {step.op}")
        names[step.out.name] = out
    if len(parsed.answer) != 1:
        return TraceProgram(None, "the trace declares more than one answer")
    ans = parsed.answer[0]
    u = unit_info(ans.unit)
    var = names[ans.name]
    conv = var if (u.scale, u.offset) == (1.0, 0.0) else f"({var} - {_literal(u.offset)}) / {_literal(u.scale)}"
    unit = "" if ans.unit == "dimensionless" else ans.unit
    lines.append(f"print(round({conv}, 6), {unit!r})" if unit else f"print(round({conv}, 6))")
    return TraceProgram("\n".join(lines) + "\n")
