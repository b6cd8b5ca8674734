"""Arithmetic primitives: the core ops every trace may rely on (add, sub, mul, div, pow, ...) and aggregates."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pcr_ray.core.primitives.registry import DimError, DomainError, Param, product_rule, quotient_rule, register
from pcr_ray.core.units import DIMENSIONLESS, Dims

F = "arithmetic"


def _pow_rule(dims: Mapping[str, Dims], values: Mapping[str, Any]) -> Dims:
    x = dims["x"]
    if x == DIMENSIONLESS:
        return DIMENSIONLESS
    y = values.get("y")
    if y is None or abs(y - round(y)) > 1e-12:
        raise DimError("pow: a quantity with units can only be raised to an integer power")
    return tuple(e * int(round(y)) for e in x)


def _root_rule(n: int):
    def rule(dims: Mapping[str, Dims], _v: Mapping[str, Any]) -> Dims:
        x = dims["x"]
        if any(e % n for e in x):
            raise DimError(f"root of order {n} of a unit whose exponents are not multiples of {n}")
        return tuple(e // n for e in x)

    return rule


def _sqrt(x: float) -> float:
    if x < 0:
        raise DomainError(f"sqrt of a negative number ({x:g})")
    return math.sqrt(x)


def _div(x: float, y: float) -> float:
    if y == 0:
        raise DomainError("division by zero")
    return x / y


def _pow(x: float, y: float) -> float:
    if x == 0 and y < 0:
        raise DomainError("zero raised to a negative power")
    if x < 0 and abs(y - round(y)) > 1e-12:
        raise DomainError(f"negative base ({x:g}) raised to a non-integer power ({y:g})")
    try:
        return float(x**y)
    except OverflowError:
        raise DomainError("overflow in pow") from None


def _mod(x: float, y: float) -> float:
    if y == 0:
        raise DomainError("modulo by zero")
    return math.fmod(x, y) if x >= 0 else x % y


def _ratio(x: float, y: float) -> float:
    return _div(x, y)


def _percent_change(old: float, new: float) -> float:
    if old == 0:
        raise DomainError("percent change from zero")
    return (new - old) / old


XY_SAME = [Param("x"), Param("y", "=x")]
XY_ANY = [Param("x"), Param("y")]
register("add", F, XY_SAME, "=x", lambda x, y: x + y, "x + y", "Sum of two quantities of the same dimension.",
         commutative=True)
register("sub", F, XY_SAME, "=x", lambda x, y: x - y, "x - y", "Difference x minus y (same dimension).")
register("mul", F, XY_ANY, product_rule, lambda x, y: x * y, "x * y", "Product; dimensions multiply.",
         commutative=True)
register("div", F, XY_ANY, quotient_rule, _div, "x / y", "Quotient x over y; dimensions divide.")
register("pow", F, [Param("x"), Param("y", "dimensionless")], _pow_rule, _pow, "x ** y",
         "x raised to a dimensionless power y (an integer when x has units).")
register("neg", F, [Param("x")], "=x", lambda x: -x, "-x", "Negation.")
register("sqrt", F, [Param("x")], _root_rule(2), _sqrt, "sqrt(x)", "Square root; unit exponents halve.")
register("cbrt", F, [Param("x")], _root_rule(3), lambda x: math.copysign(abs(x) ** (1 / 3), x), "cbrt(x)",
         "Cube root; unit exponents divide by three.")
register("square", F, [Param("x")], lambda d, v: tuple(2 * e for e in d["x"]), lambda x: x * x, "x ** 2",
         "Square of a quantity.")
register("cube", F, [Param("x")], lambda d, v: tuple(3 * e for e in d["x"]), lambda x: x**3, "x ** 3",
         "Cube of a quantity.")
register("reciprocal", F, [Param("x")], lambda d, v: tuple(-e for e in d["x"]), lambda x: _div(1.0, x), "1 / x",
         "Reciprocal; unit exponents negate.")
register("abs", F, [Param("x")], "=x", lambda x: abs(x), "|x|", "Absolute value.")
register("min", F, XY_SAME, "=x", lambda x, y: min(x, y), "min(x, y)", "Smaller of two quantities.", commutative=True)
register("max", F, XY_SAME, "=x", lambda x, y: max(x, y), "max(x, y)", "Larger of two quantities.", commutative=True)
register("sum", F, [Param("x1"), Param("x2", "=x1")], "=x1", lambda **kw: math.fsum(kw.values()),
         "x1 + x2 + ... + xN", "Sum of 2 to 8 quantities of one dimension.", variadic=True, commutative=True)
register("mean", F, [Param("x1"), Param("x2", "=x1")], "=x1", lambda **kw: math.fsum(kw.values()) / len(kw),
         "(x1 + ... + xN) / N", "Arithmetic mean of 2 to 8 quantities of one dimension.", variadic=True,
         commutative=True)
register("product", F, [Param("x1", "dimensionless"), Param("x2", "dimensionless")], "dimensionless",
         lambda **kw: math.prod(kw.values()), "x1 * x2 * ... * xN", "Product of 2 to 8 dimensionless numbers.",
         variadic=True, commutative=True)
register("floor", F, [Param("x", "dimensionless")], "dimensionless", lambda x: float(math.floor(x)), "floor(x)",
         "Largest integer not above x.")
register("ceil", F, [Param("x", "dimensionless")], "dimensionless", lambda x: float(math.ceil(x)), "ceil(x)",
         "Smallest integer not below x.")
register("round", F, [Param("x", "dimensionless"), Param("ndigits", "dimensionless")], "dimensionless",
         lambda x, ndigits: float(round(x, int(ndigits))), "round(x, ndigits)", "Round to ndigits decimals.")
register("mod", F, XY_SAME, "=x", _mod, "x mod y", "Remainder of x divided by y.")
register("floordiv", F, XY_SAME, "dimensionless", lambda x, y: float(math.floor(_div(x, y))), "floor(x / y)",
         "How many whole y fit in x (e.g. whole boxes).")
register("ratio", F, XY_SAME, "dimensionless", _ratio, "x / y", "Dimensionless ratio of like quantities.")
register("percent_of", F, [Param("p", "dimensionless"), Param("x")], "=x", lambda p, x: p * x, "p * x",
         "A fraction p (e.g. 20 percent = 0.2) of x.")
register("percent_change", F, [Param("old"), Param("new", "=old")], "dimensionless", _percent_change,
         "(new - old) / old", "Relative change from old to new, as a fraction.")
register("increase_by_percent", F, [Param("x"), Param("p", "dimensionless")], "=x", lambda x, p: x * (1 + p),
         "x * (1 + p)", "x increased by a fraction p.")
register("decrease_by_percent", F, [Param("x"), Param("p", "dimensionless")], "=x", lambda x, p: x * (1 - p),
         "x * (1 - p)", "x decreased by a fraction p.")
register("as_percent", F, [Param("x", "dimensionless")], "dimensionless", lambda x: x, "x (shown in percent)",
         "A dimensionless fraction, to be declared in 'percent'.")
register("scale", F, [Param("x"), Param("k", "dimensionless")], "=x", lambda x, k: x * k, "k * x",
         "x times a dimensionless factor k (e.g. twice, half).")
register("fraction_of", F, [Param("x"), Param("num", "dimensionless"), Param("den", "dimensionless")], "=x",
         lambda x, num, den: x * _div(num, den), "x * num / den", "num/den of x (e.g. 3/4 of the class).")
register("diff_abs", F, XY_SAME, "=x", lambda x, y: abs(x - y), "|x - y|", "Absolute difference.",
         commutative=True)
register("hypot", F, XY_SAME, "=x", lambda x, y: math.hypot(x, y), "sqrt(x^2 + y^2)",
         "Magnitude of a 2-D vector (x, y).",
         commutative=True)
register("weighted_mean", F, [Param("x1"), Param("w1", "dimensionless"), Param("x2", "=x1"),
                              Param("w2", "dimensionless")], "=x1",
         lambda x1, w1, x2, w2: _div(x1 * w1 + x2 * w2, w1 + w2), "(x1 w1 + x2 w2) / (w1 + w2)",
         "Weighted mean of two quantities.")
register("lerp", F, [Param("a"), Param("b", "=a"), Param("t", "dimensionless")], "=a",
         lambda a, b, t: a + (b - a) * t, "a + (b - a) t", "Linear interpolation between a and b.")
