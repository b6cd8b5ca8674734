"""Counted kinds: the verifier's dimensional analysis applied to what a count counts (sacks are not oranges).

Every count noun (`orange`, `sack`; pcr_ray.core.units.DEFAULT_COUNT_UNITS) is a `[count]` unit, so the
dimension check alone lets `add(8 sack, 35 orange)` through. Here each noun is a kind of its own, with
exponents like a dimension: `mul(8 sack, 35 orange/sack) = 280 orange` works out, `add(8 sack, 35 orange)`
does not. The rules, for the arithmetic ops:

- arguments that must share a dimension (add, sub, min, ratio, sum, ...) must count the same kinds, except that
  a sum or difference of two different kinds is a count of a third kind that covers both (`boys + girls =
  children`), never of one of them (`sacks + oranges = oranges` is the ungrounded step this rejects);
- a dimensionless factor (scale's k, percent_of's p) counts nothing: a rate such as 35 orange/sack is multiplied
  in with `mul`, which carries its kinds;
- the output counts what the op's dimension rule gives (products add exponents, quotients subtract);
- a physical formula (kinematics, trigonometry, ...) takes no counted argument: 35 orange/sack is no angle;
  the counted arguments of any other op (algebra, finance, exponential) count one and the same thing.

A unit that holds the generic `item` counts something unknown: a step touching one is not checked, so text the
extractor could not type stays as permissive as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pcr_ray.core.primitives import DimError, Primitive
from pcr_ray.core.primitives.registry import DIMLESS, SAME
from pcr_ray.core.units import (
    BASE_DIMS,
    DIMENSIONLESS,
    Dims,
    Kinds,
    UnitError,
    canonical_unit,
    count_kinds,
    format_kinds,
    try_unit_info,
)

CHECKED_FAMILY = "arithmetic"
_COUNT = BASE_DIMS.index("[count]")
PHYSICAL_FAMILIES = frozenset({"circuits", "constants", "dynamics", "energy", "kinematics", "thermodynamics",
                               "trigonometry", "waves_optics"})  # formulas over physical quantities only
UNION_OPS = frozenset({"add", "sub", "sum"})  # a sum of different kinds may be declared as a covering kind


def kinds_or_none(unit: str | None) -> Kinds | None:
    """The kinds a unit counts (() for a literal, None for `item` or a unit that does not parse)."""
    if unit is None:
        return ()
    try:
        return count_kinds(unit)
    except UnitError:
        return None


@lru_cache(maxsize=8192)
def counts_something(unit: str) -> bool:
    """Whether a unit counts anything (a noun or the generic item): the verifier's fast path skips the rest."""
    return kinds_or_none(unit) != ()


def count_error(prim: Primitive, arg_units: Mapping[str, str | None], out_unit: str,
                values: Mapping[str, Any] | None = None) -> tuple[str, str] | None:
    """(code, message) when a step's counted kinds do not work out, else None.

    `arg_units` maps each variable parameter to its argument's unit (None for a literal); for a variadic op the
    keys are x1..xN. A step of the arithmetic family touching the generic `item` is not checked.
    """
    if prim.family != CHECKED_FAMILY:
        return _uncounted_error(prim, arg_units)
    kinds = _arg_kinds(arg_units)
    if kinds is None:
        return None
    out = kinds_or_none(out_unit)
    if out is None:
        return None
    if not out and not any(kinds.values()):
        return None  # nothing counted anywhere (physics, money, time)
    if prim.variadic:
        return _variadic_error(prim, kinds, out)
    for p in prim.params:
        if p.kind != "var" or p.name not in kinds:
            continue
        k = kinds[p.name]
        if p.rkind == DIMLESS and k:
            return "count_mismatch", (f"{prim.name}: '{p.name}' is a plain factor and counts nothing, but its "
                                      f"argument counts {format_kinds(k)}; multiply a rate in with mul")
        if p.rkind == SAME and p.rref in kinds and k != kinds[p.rref]:
            if prim.name in UNION_OPS and _covers(out, (k, kinds[p.rref])):
                return None
            return "count_mismatch", (f"{prim.name}: '{p.rref}' counts {format_kinds(kinds[p.rref])} and "
                                      f"'{p.name}' counts {format_kinds(k)}; like counts only")
    want = _out_kinds(prim, kinds, values or {})
    if want is not None and want != out:
        return "count_mismatch", (f"{prim.name} gives a count of {format_kinds(want)}, but out unit "
                                  f"'{out_unit}' counts {format_kinds(out)}")
    return None


def _uncounted_error(prim: Primitive, arg_units: Mapping[str, str | None]) -> tuple[str, str] | None:
    """Outside arithmetic: no counted argument in a physical formula, no plain factor that counts, and the counted
    arguments of an algebra, finance or exponential op count one thing."""
    params = {p.name: p for p in prim.params}
    seen: tuple[str, Kinds] | None = None
    for n, u in arg_units.items():
        k = kinds_or_none(u) if u is not None else ()
        if not k:
            continue
        if seen is not None and seen[1] != k:
            return "count_mismatch", (f"{prim.name}: '{seen[0]}' counts {format_kinds(seen[1])} and '{n}' counts "
                                      f"{format_kinds(k)}; a {prim.family} op relates like counts only")
        seen = seen or (n, k)
        if prim.family in PHYSICAL_FAMILIES:
            return "count_mismatch", (f"{prim.name}: '{n}' counts {format_kinds(k)}, and {prim.family} formulas "
                                      f"take no counted things")
        p = params.get(n) or prim.params[0]
        if p.rkind == DIMLESS:
            return "count_mismatch", (f"{prim.name}: '{n}' is a plain number and counts nothing, but its argument "
                                      f"counts {format_kinds(k)}")
    return None


def out_kinds(prim: Primitive, arg_units: Mapping[str, str | None],
              values: Mapping[str, Any] | None = None) -> Kinds | None:
    """The kinds a step's output counts under the op's rule (None when unknown or not an arithmetic op)."""
    if prim.family != CHECKED_FAMILY:
        return None
    kinds = _arg_kinds(arg_units)
    if kinds is None:
        return None
    if prim.variadic:
        first = next(iter(kinds.values()), ())
        return first if prim.out_dims is None else ()
    return _out_kinds(prim, kinds, values or {})


def _arg_kinds(arg_units: Mapping[str, str | None]) -> dict[str, Kinds] | None:
    """Each argument's kinds, or None when one of them counts the generic item."""
    kinds: dict[str, Kinds] = {}
    for n, u in arg_units.items():
        k = kinds_or_none(u)
        if k is None:
            return None
        kinds[n] = k
    return kinds


def _variadic_error(prim: Primitive, kinds: Mapping[str, Kinds], out: Kinds) -> tuple[str, str] | None:
    first_name, first = next(iter(kinds.items()))
    odd = [(n, k) for n, k in kinds.items() if k != first]
    if odd:
        if prim.name in UNION_OPS and _covers(out, tuple(kinds.values())):
            return None
        n, k = odd[0]
        return "count_mismatch", (f"{prim.name}: '{first_name}' counts {format_kinds(first)} and '{n}' counts "
                                  f"{format_kinds(k)}; like counts only")
    want = first if prim.out_dims is None else ()
    if want != out:
        return "count_mismatch", (f"{prim.name} gives a count of {format_kinds(want)}, but out unit counts "
                                  f"{format_kinds(out)}")
    return None


def _covers(out: Kinds, parts: tuple[Kinds, ...]) -> bool:
    """A covering kind: one noun to the first power, none of the parts' own kinds."""
    return len(out) == 1 and out[0][1] == 1 and all(k and len(k) == 1 and k != out for k in parts)


def _out_kinds(prim: Primitive, kinds: Mapping[str, Kinds], values: Mapping[str, Any]) -> Kinds | None:
    if prim.out_dims is not None:
        return ()
    if prim.out_ref:
        return kinds.get(prim.out_ref, ())
    nouns = sorted({n for k in kinds.values() for n, _ in k})
    if not nouns:
        return ()
    vecs = {p: tuple(dict(k).get(n, 0) for n in nouns) for p, k in kinds.items()}
    try:
        vec = prim.out(vecs, values)  # type: ignore[operator]
    except (DimError, KeyError, TypeError, ValueError):
        return None
    return tuple((n, int(e)) for n, e in zip(nouns, vec, strict=True) if e)


def kinds_unit(dims: Dims, kinds: Kinds) -> str | None:
    """A unit string of dimension `dims` that counts `kinds` ('orange', 'USD/orange', 'orange/sack'), or None."""
    if not kinds or dims[_COUNT] != sum(e for _, e in kinds):
        return None
    rest = tuple(0 if i == _COUNT else e for i, e in enumerate(dims))
    base = canonical_unit(rest)
    num = [] if rest == DIMENSIONLESS else [f"({base})" if "/" in base or "*" in base else base]
    num += [n + (f"^{e}" if e != 1 else "") for n, e in kinds if e > 0]
    den = [n + (f"^{-e}" if e != -1 else "") for n, e in kinds if e < 0]
    text = "*".join(num) or "1"
    if den:
        text += "/" + ("(" + "*".join(den) + ")" if len(den) > 1 else den[0])
    info = try_unit_info(text)
    if info is None or info.dims != dims or info.scale != 1.0 or kinds_or_none(text) != kinds:
        return None
    return text
