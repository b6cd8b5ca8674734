"""The op registry Σ: Primitive and Param definitions, dimension rules, and `register`.

A primitive declares its parameters with dimension constraints, an output dimension rule, a numeric
implementation over SI base-unit floats, a formula string and a one-line description. Everything that
needs to know about ops (verifier, CSP, enumerator, JSON Schema, prompts, docs) reads REGISTRY.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pcr_ray.core.units import DIMENSIONLESS, Dims, dims_div, dims_mul, unit_info


class DimError(Exception):
    """An argument's dimension violates a primitive's rule. `code` is the diagnostic code."""

    def __init__(self, message: str, code: str = "unit_mismatch") -> None:
        super().__init__(message)
        self.code = code


class DomainError(Exception):
    """A value outside a primitive's domain (sqrt of a negative, log of zero, ...)."""


# Param.dim kinds after resolution
ANY = "any"
EXACT = "exact"
SAME = "same"
DIMLESS = "dimless"


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter: `dim` is a unit string (exact dimension), 'any', 'dimensionless', or '=other' (same as other).

    kind 'var' takes a variable name or a dimensionless literal; 'name' takes a string from `choices`
    (e.g. a constant's name); 'expr' takes an expression string over dimensionless variables.
    """

    name: str
    dim: str = "any"
    kind: str = "var"
    choices: tuple[str, ...] = ()
    desc: str = ""
    # resolved form, filled by register()
    rkind: str = ""
    rdims: Dims | None = None
    rref: str = ""


OutRule = Callable[[Mapping[str, Dims], Mapping[str, Any]], Dims]


@dataclass(frozen=True, slots=True)
class Primitive:
    """One op of the trace DSL."""

    name: str
    family: str
    params: tuple[Param, ...]
    out: str | OutRule
    fn: Callable[..., float]
    formula: str
    description: str
    variadic: bool = False  # params are x1..xN (N in [2, 8]), all of params[0].dim
    commutative: bool = False
    out_dims: Dims | None = field(default=None)  # fixed output dims when `out` is a unit string
    out_ref: str = ""  # '=x' output rule resolved

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def out_dims_for(self, arg_dims: Mapping[str, Dims], arg_values: Mapping[str, Any]) -> Dims:
        """Output dimension given argument dimensions (raises DimError)."""
        if self.out_dims is not None:
            return self.out_dims
        if self.out_ref:
            return arg_dims[self.out_ref]
        return self.out(arg_dims, arg_values)  # type: ignore[operator]

    def check_args(self, arg_dims: Mapping[str, Dims]) -> None:
        """Raise DimError when an argument's dimension violates its parameter's constraint."""
        for p in self.params:
            if p.kind != "var":
                continue
            d = arg_dims.get(p.name)
            if d is None:
                continue
            if p.rkind == EXACT and d != p.rdims:
                raise DimError(f"{self.name}: argument '{p.name}' must have the dimension of {p.dim}")
            if p.rkind == DIMLESS and d != DIMENSIONLESS:
                raise DimError(f"{self.name}: argument '{p.name}' must be dimensionless", "not_dimensionless")
            if p.rkind == SAME and d != arg_dims.get(p.rref):
                raise DimError(f"{self.name}: '{p.name}' and '{p.rref}' must have the same dimension")

    def signature(self) -> str:
        ps = ", ".join(f"{p.name}[{p.dim}]" if p.kind == "var" else f"{p.name}:{p.kind}" for p in self.params)
        if self.variadic:
            ps = f"x1, x2, ... x8 [{self.params[0].dim}, all the same]"
        out = self.out if isinstance(self.out, str) else "rule"
        return f"{self.name}({ps}) -> [{out}]"


REGISTRY: dict[str, Primitive] = {}
VARIADIC_MAX = 8


def _resolve_param(p: Param) -> Param:
    if p.kind != "var":
        return Param(p.name, p.dim, p.kind, p.choices, p.desc, ANY, None, "")
    if p.dim == "any":
        return Param(p.name, p.dim, p.kind, p.choices, p.desc, ANY, None, "")
    if p.dim == "dimensionless":
        return Param(p.name, p.dim, p.kind, p.choices, p.desc, DIMLESS, DIMENSIONLESS, "")
    if p.dim.startswith("="):
        return Param(p.name, p.dim, p.kind, p.choices, p.desc, SAME, None, p.dim[1:])
    return Param(p.name, p.dim, p.kind, p.choices, p.desc, EXACT, unit_info(p.dim).dims, "")


def register(
    name: str,
    family: str,
    params: list[Param] | tuple[Param, ...] | str,
    out: str | OutRule,
    fn: Callable[..., float],
    formula: str,
    description: str,
    *,
    variadic: bool = False,
    commutative: bool = False,
) -> Primitive:
    """Add a primitive to REGISTRY. `params` may be a compact string 'v0:m/s, a:m/s^2, t:s'."""
    if name in REGISTRY:
        raise ValueError(f"primitive {name!r} registered twice")
    if isinstance(params, str):
        plist = []
        for part in params.split(","):
            part = part.strip()
            if not part:
                continue
            pname, _, pdim = part.partition(":")
            plist.append(Param(pname.strip(), pdim.strip() or "any"))
        params = plist
    resolved = tuple(_resolve_param(p) for p in params)
    out_dims = None
    out_ref = ""
    if isinstance(out, str):
        if out.startswith("="):
            out_ref = out[1:]
        else:
            out_dims = DIMENSIONLESS if out == "dimensionless" else unit_info(out).dims
    prim = Primitive(name, family, resolved, out, fn, formula, description, variadic, commutative, out_dims, out_ref)
    REGISTRY[name] = prim
    return prim


def product_rule(dims: Mapping[str, Dims], _v: Mapping[str, Any]) -> Dims:
    return dims_mul(dims["x"], dims["y"])


def quotient_rule(dims: Mapping[str, Dims], _v: Mapping[str, Any]) -> Dims:
    return dims_div(dims["x"], dims["y"])


product_rule.uses_values = False  # type: ignore[attr-defined]  # the verifier skips building the values map
quotient_rule.uses_values = False  # type: ignore[attr-defined]


def families() -> list[str]:
    return sorted({p.family for p in REGISTRY.values()})
