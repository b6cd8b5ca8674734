"""Shared numeric helpers for the primitive families: guarded registration and domain-checked math."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

from pcr_ray.core.primitives.registry import DimError, DomainError, OutRule, Param, Primitive, register
from pcr_ray.core.units import Dims, dims_div, dims_mul


def guarded(fn: Callable[..., float]) -> Callable[..., float]:
    """Wrap an op so math errors become DomainError and non-finite or complex results are rejected.

    functools.wraps keeps `__wrapped__`, so inspect.signature(wrapper) still shows the original parameters
    (the verifier looks for `_env` there).
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> float:
        try:
            out = fn(*args, **kwargs)
        except DomainError:
            raise
        except ZeroDivisionError:
            raise DomainError("division by zero") from None
        except OverflowError:
            raise DomainError("numeric overflow") from None
        except ValueError as exc:  # math domain error and friends
            raise DomainError(f"math domain error ({exc})") from None
        if isinstance(out, complex):
            raise DomainError("the result is not a real number")
        out = float(out)
        if not math.isfinite(out):
            raise DomainError("the result is not finite")
        return out

    return wrapper


def reg(
    name: str,
    family: str,
    params: list[Param] | tuple[Param, ...] | str,
    out: str | OutRule,
    fn: Callable[..., float],
    formula: str,
    description: str,
    **kw: Any,
) -> Primitive:
    """`register` with the op wrapped by `guarded`."""
    return register(name, family, params, out, guarded(fn), formula, description, **kw)


def div(x: float, y: float, what: str = "division by zero") -> float:
    if y == 0:
        raise DomainError(what)
    return x / y


def sqrt(x: float, what: str = "") -> float:
    if x < 0:
        # tiny negative values from rounding (e.g. v^2 - v^2) count as zero
        if x > -1e-12:
            return 0.0
        raise DomainError(what or f"square root of a negative number ({x:g})")
    return math.sqrt(x)


def positive(x: float, name: str) -> float:
    if x <= 0:
        raise DomainError(f"{name} must be positive (got {x:g})")
    return x


def nonneg(x: float, name: str) -> float:
    if x < 0:
        raise DomainError(f"{name} must not be negative (got {x:g})")
    return x


def as_int(x: float, name: str, lo: int | None = 0, hi: int = 10**15) -> int:
    """x as an int; DomainError unless x is (within 1e-9) an integer in [lo, hi]."""
    if not math.isfinite(x) or abs(x - round(x)) > 1e-9 * max(1.0, abs(x)):
        raise DomainError(f"{name} must be an integer (got {x:g})")
    n = int(round(x))
    if lo is not None and n < lo:
        raise DomainError(f"{name} must be at least {lo} (got {n})")
    if abs(n) > hi:
        raise DomainError(f"{name} is too large (|{name}| <= {hi})")
    return n


def values_free(rule: OutRule) -> OutRule:
    """Mark an output rule that ignores argument values (the verifier then skips building the values map)."""
    rule.uses_values = False  # type: ignore[attr-defined]
    return rule


def product_of(a: str, b: str) -> OutRule:
    """Output rule: dims(a) * dims(b)."""

    def rule(dims: Mapping[str, Dims], _v: Mapping[str, Any]) -> Dims:
        return dims_mul(dims[a], dims[b])

    return values_free(rule)


def quotient_of(a: str, b: str) -> OutRule:
    """Output rule: dims(a) / dims(b)."""

    def rule(dims: Mapping[str, Dims], _v: Mapping[str, Any]) -> Dims:
        return dims_div(dims[a], dims[b])

    return values_free(rule)


def power_of(a: str, n: int) -> OutRule:
    """Output rule: dims(a) ** n."""

    def rule(dims: Mapping[str, Dims], _v: Mapping[str, Any]) -> Dims:
        return tuple(n * e for e in dims[a])

    return values_free(rule)


def require(cond: bool, message: str) -> None:
    if not cond:
        raise DimError(message)
