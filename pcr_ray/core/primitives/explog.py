"""Exponential and logarithm primitives, plus exponential growth, decay and half-life relations."""

from __future__ import annotations

import math

from pcr_ray.core.primitives.numeric import div, positive, reg
from pcr_ray.core.primitives.registry import DomainError, Param

F = "exponential"
LN2 = math.log(2.0)


def _exp(x: float) -> float:
    if x > 709.0:
        raise DomainError(f"exp({x:g}) overflows")
    return math.exp(x)


def _ln(x: float) -> float:
    if x <= 0:
        raise DomainError(f"logarithm of a non-positive number ({x:g})")
    return math.log(x)


def _log_base(x: float, base: float) -> float:
    if base <= 0 or base == 1:
        raise DomainError(f"logarithm base must be positive and not 1 (got {base:g})")
    return _ln(x) / math.log(base)


def _log_ratio(x: float, y: float) -> float:
    return _ln(div(x, y))


D = "dimensionless"
reg("exp", F, [Param("x", D)], D, _exp, "e^x", "Natural exponential of a dimensionless x.")
reg("ln", F, [Param("x", D)], D, _ln, "ln(x)", "Natural logarithm of a positive dimensionless x.")
reg("log", F, [Param("x", D)], D, _ln, "ln(x)",
    "Natural logarithm (same as ln) of a positive dimensionless x.")
reg("log10", F, [Param("x", D)], D, lambda x: _ln(x) / math.log(10.0), "log10(x)",
    "Base-10 logarithm of a positive dimensionless x.")
reg("log2", F, [Param("x", D)], D, lambda x: _ln(x) / LN2, "log2(x)", "Base-2 logarithm of a positive x.")
reg("log_base", F, [Param("x", D), Param("base", D)], D, _log_base, "ln(x) / ln(base)",
    "Logarithm of x in an arbitrary base (e.g. how many doublings).")
reg("log_ratio", F, [Param("x"), Param("y", "=x")], D, _log_ratio, "ln(x / y)",
    "Natural log of the ratio of two like quantities (e.g. ln(N0 / N)).")
reg("exp_decay", F, [Param("n0"), Param("k", "1/s"), Param("t", "s")], "=n0",
    lambda n0, k, t: n0 * _exp(-k * t), "n0 * e^(-k t)",
    "Quantity left after exponential decay at rate k for t.")
reg("exp_growth", F, [Param("n0"), Param("k", "1/s"), Param("t", "s")], "=n0",
    lambda n0, k, t: n0 * _exp(k * t), "n0 * e^(k t)",
    "Quantity after exponential growth at rate k for time t.")
reg("half_life_decay", F, [Param("n0"), Param("t_half", "s"), Param("t", "s")], "=n0",
    lambda n0, t_half, t: n0 * 0.5 ** div(t, positive(t_half, "half-life")), "n0 * (1/2)^(t / t_half)",
    "Quantity left after time t given a half-life t_half.")
reg("half_life_from_rate", F, [Param("k", "1/s")], "s", lambda k: LN2 / positive(k, "decay rate"),
    "ln(2) / k", "Half-life from a decay rate constant k.")
reg("rate_from_half_life", F, [Param("t_half", "s")], "1/s",
    lambda t_half: LN2 / positive(t_half, "half-life"), "ln(2) / t_half",
    "Decay rate constant from a half-life.")
reg("decay_time", F, [Param("n0"), Param("n", "=n0"), Param("k", "1/s")], "s",
    lambda n0, n, k: _log_ratio(n0, n) / positive(k, "decay rate"), "ln(n0 / n) / k",
    "Time for an exponential decay at rate k to go from n0 to n.")
