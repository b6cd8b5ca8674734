"""Trigonometry primitives: angles are dimensionless radians in base units (degrees convert on input)."""

from __future__ import annotations

import math

from pcr_ray.core.primitives.numeric import div, power_of, reg, sqrt
from pcr_ray.core.primitives.registry import DomainError, Param

F = "trigonometry"
ANGLE = "dimensionless"


def _unit_interval(x: float, name: str) -> float:
    if x > 1.0:
        if x - 1.0 <= 1e-12:
            return 1.0
        raise DomainError(f"{name} of {x:g}: the argument must be in [-1, 1]")
    if x < -1.0:
        if -1.0 - x <= 1e-12:
            return -1.0
        raise DomainError(f"{name} of {x:g}: the argument must be in [-1, 1]")
    return x


def _tan(x: float) -> float:
    c = math.cos(x)
    if abs(c) < 1e-15:
        raise DomainError("tan is undefined at an odd multiple of pi/2")
    return math.sin(x) / c


def _atan2(y: float, x: float) -> float:
    if x == 0 and y == 0:
        raise DomainError("atan2(0, 0): the angle of a zero vector is undefined")
    return math.atan2(y, x)


def _cot(x: float) -> float:
    s = math.sin(x)
    if abs(s) < 1e-15:
        raise DomainError("cot is undefined at a multiple of pi")
    return math.cos(x) / s


def _law_of_cosines_angle(a: float, b: float, c: float) -> float:
    if not (a > 0 and b > 0 and c > 0):
        raise DomainError("triangle sides must be positive")
    cosc = (a * a + b * b - c * c) / (2 * a * b)
    return math.acos(_unit_interval(cosc, "acos (no triangle with these sides)"))


def _law_of_sines_side(a: float, alpha: float, beta: float) -> float:
    s = math.sin(alpha)
    if abs(s) < 1e-15:
        raise DomainError("law of sines: sin of the known angle is zero")
    return a * math.sin(beta) / s


X = [Param("x", ANGLE)]
reg("sin", F, X, "dimensionless", lambda x: math.sin(x), "sin(x)",
    "Sine of an angle x (radians; degrees convert).")
reg("cos", F, X, "dimensionless", lambda x: math.cos(x), "cos(x)",
    "Cosine of an angle x (radians; degrees convert).")
reg("tan", F, X, "dimensionless", _tan, "tan(x)", "Tangent of an angle x (radians; degrees convert).")
reg("cot", F, X, "dimensionless", _cot, "cos(x) / sin(x)", "Cotangent of an angle x.")
reg("asin", F, [Param("x", "dimensionless")], ANGLE, lambda x: math.asin(_unit_interval(x, "asin")),
    "asin(x)", "Arcsine, an angle in radians (x in [-1, 1]).")
reg("acos", F, [Param("x", "dimensionless")], ANGLE, lambda x: math.acos(_unit_interval(x, "acos")),
    "acos(x)", "Arccosine, an angle in radians (x in [-1, 1]).")
reg("atan", F, [Param("x", "dimensionless")], ANGLE, lambda x: math.atan(x), "atan(x)",
    "Arctangent, an angle in radians.")
reg("atan2", F, [Param("y"), Param("x", "=y")], ANGLE, _atan2, "atan2(y, x)",
    "Angle of the vector (x, y) from the +x axis, in radians (y and x of one dimension).")
reg("deg_to_rad", F, X, ANGLE, lambda x: x, "x (declare the output in rad)",
    "An angle re-expressed in radians (identity on base values; declare the out unit 'rad').")
reg("rad_to_deg", F, X, ANGLE, lambda x: x, "x (declare the output in degree)",
    "An angle re-expressed in degrees (identity on base values; declare the out unit 'degree').")
reg("hyp_from_legs", F, [Param("a"), Param("b", "=a")], "=a", lambda a, b: math.hypot(a, b),
    "sqrt(a^2 + b^2)", "Hypotenuse of a right triangle from its two legs.", commutative=True)
reg("leg_from_hyp", F, [Param("c"), Param("a", "=c")], "=c",
    lambda c, a: sqrt(c * c - a * a, "leg_from_hyp: the leg is longer than the hypotenuse"),
    "sqrt(c^2 - a^2)", "The other leg of a right triangle from the hypotenuse c and one leg a.")
reg("opposite_from_hyp", F, [Param("c"), Param("theta", ANGLE)], "=c", lambda c, theta: c * math.sin(theta),
    "c * sin(theta)", "Side opposite angle theta in a right triangle with hypotenuse c (also a y-component).")
reg("adjacent_from_hyp", F, [Param("c"), Param("theta", ANGLE)], "=c", lambda c, theta: c * math.cos(theta),
    "c * cos(theta)",
    "Side adjacent to angle theta in a right triangle with hypotenuse c (also an x-component).")
reg("opposite_from_adjacent", F, [Param("adj"), Param("theta", ANGLE)], "=adj",
    lambda adj, theta: adj * _tan(theta), "adj * tan(theta)",
    "Side opposite angle theta from the adjacent side (e.g. a height from a distance and an elevation).")
reg("angle_from_opposite_hyp", F, [Param("opp"), Param("hyp", "=opp")], ANGLE,
    lambda opp, hyp: math.asin(_unit_interval(div(opp, hyp), "asin")), "asin(opp / hyp)",
    "Angle of a right triangle from the opposite side and the hypotenuse.")
reg("angle_from_legs", F, [Param("opp"), Param("adj", "=opp")], ANGLE, lambda opp, adj: _atan2(opp, adj),
    "atan2(opp, adj)", "Angle of a right triangle from the opposite and adjacent legs.")
reg("law_of_cosines_side", F, [Param("a"), Param("b", "=a"), Param("gamma", ANGLE)], "=a",
    lambda a, b, gamma: sqrt(a * a + b * b - 2 * a * b * math.cos(gamma)), "sqrt(a^2 + b^2 - 2ab cos(gamma))",
    "Third side of a triangle from two sides a, b and the included angle gamma.")
reg("law_of_cosines_angle", F, [Param("a"), Param("b", "=a"), Param("c", "=a")], ANGLE, _law_of_cosines_angle,
    "acos((a^2 + b^2 - c^2) / (2ab))", "Angle opposite side c in a triangle with sides a, b, c.")
reg("law_of_sines_side", F, [Param("a"), Param("alpha", ANGLE), Param("beta", ANGLE)], "=a",
    _law_of_sines_side, "a * sin(beta) / sin(alpha)",
    "Side opposite angle beta, from side a opposite angle alpha.")
reg("arc_length", F, [Param("r"), Param("theta", ANGLE)], "=r", lambda r, theta: r * theta, "r * theta",
    "Length of a circular arc of radius r subtending angle theta.")
reg("sector_area", F, [Param("r"), Param("theta", ANGLE)], power_of("r", 2),
    lambda r, theta: 0.5 * r * r * theta, "r^2 * theta / 2",
    "Area of a circular sector of radius r, angle theta.")
