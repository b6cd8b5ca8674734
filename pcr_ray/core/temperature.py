"""Temperature readings vs temperature changes: the affine rule pint keeps with degC and delta_degC.

A reading (10 °C, the air at 300 K) is a point on a scale; a change (heated by 90 K) is the difference of two
readings. Both have the dimension of temperature, so the dimension vector cannot tell them apart, and a trace
that feeds a reading where a change belongs (`heat(m, c, delta_t=T1)` with T1 = 10 °C) is dimensionally valid
and silently wrong. This module tracks the role of each variable and checks the ops that care:

- a given is a reading when its unit is an offset unit (degC, degF: pint's absolute temperatures) and a change
  when its unit is a delta unit (delta_degC, delta_degF); a kelvin given is unknown (kelvin serves both roles);
- parameters of temperature dimension named `delta_t` take changes, the other ones (T in the gas laws, Carnot,
  radiation) take absolute readings; a known reading where a change belongs, or the reverse, is an error;
- reading - reading is a change; reading +/- change is a reading; change +/- change is a change;
  reading + reading and change - reading are errors (pint raises on them too); the mean of readings is a reading;
- ops that return a temperature say which one (`temperature_change` a change, `mixing_temperature` and
  `ideal_gas_temperature` readings); anything else gives an unknown role, which is never an error;
- an answer keeps its role: a change is not requested in degC or degF, a reading not in delta_degC.

Unknown roles keep the check conservative: it rejects only what is wrong whatever the kelvin values mean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from typing import Any

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.units import try_unit_info

READING, CHANGE, UNKNOWN = "reading", "change", ""

# ops whose temperature output has a fixed role
OUTPUT_ROLES: dict[str, str] = {
    "temperature_change": CHANGE,
    "mixing_temperature": READING,
    "ideal_gas_temperature": READING,
}
_AFFINE_OPS = ("add", "sub", "sum", "mean")

# (output role, diagnostic code, message); code is '' when the step is fine
TemperatureVerdict = tuple[str, str, str]
_OK_UNKNOWN: TemperatureVerdict = (UNKNOWN, "", "")


def given_role(unit: str) -> str:
    """The role of a given from its unit: offset units are readings, delta units changes, the rest unknown."""
    info = try_unit_info(unit)
    if info is None or not _is_temperature(info.dims):
        return UNKNOWN
    if "delta_" in unit:
        return CHANGE
    return READING if info.offset != 0.0 else UNKNOWN


def answer_role_error(role: str, unit: str) -> str:
    """Why an answer of this temperature role cannot be requested in `unit` ('' when it can): a change (the
    difference of two readings) is not a reading in degC or degF (58 degC printed for a 58 K difference), and a
    reading is not a change in delta_degC. Kelvin, and any variable of unknown role, serve both."""
    asked = given_role(unit)
    if role == CHANGE and asked == READING:
        return (f"is a temperature change (a difference of readings), but '{unit}' asks for a temperature reading; "
                f"answer the reading the problem asks for, or request the change in K or delta_{unit}")
    if role == READING and asked == CHANGE:
        return (f"is a temperature reading, but '{unit}' asks for a temperature change; answer the difference of "
                f"two readings, or request the reading in K or {unit.replace('delta_', '')}")
    return ""


@lru_cache(maxsize=1)
def _temperature_dims() -> Any:
    info = try_unit_info("K")
    assert info is not None
    return info.dims


def _is_temperature(dims: Any) -> bool:
    return dims == _temperature_dims()


@cache
def param_roles(op: str) -> dict[str, str]:
    """Parameter name -> role for an op's parameters of temperature dimension (empty for other ops)."""
    prim = REGISTRY.get(op)
    if prim is None:
        return {}
    return {p.name: (CHANGE if p.name == "delta_t" else READING)
            for p in prim.params if p.rdims is not None and _is_temperature(p.rdims)}


@cache
def checks_op(op: str) -> bool:
    """Whether `step_role` can say anything about this op (the verifier skips the others)."""
    return op in _AFFINE_OPS or op in OUTPUT_ROLES or bool(param_roles(op))


def step_role(op: str, args: Mapping[str, Any], role_of: Callable[[str], str]) -> TemperatureVerdict:
    """The role of a step's output and, when the step mixes readings and changes wrongly, a code and message.

    `role_of(name)` gives a variable's role (UNKNOWN for literals or unknown names).
    """
    roles = {p: (role_of(a) if isinstance(a, str) else UNKNOWN) for p, a in args.items()}
    for p, want in param_roles(op).items():
        got = roles.get(p, UNKNOWN)
        if got == READING and want == CHANGE:
            return (UNKNOWN, "temperature_reading_as_change",
                    f"{op}: '{p}' takes a temperature change, but '{args[p]}' is a temperature reading; "
                    f"subtract two readings first (sub(x=later, y=earlier))")
        if got == CHANGE and want == READING:
            return (UNKNOWN, "temperature_change_as_reading",
                    f"{op}: '{p}' takes an absolute temperature, but '{args[p]}' is a temperature change")
    if op in OUTPUT_ROLES:
        return (OUTPUT_ROLES[op], "", "")
    if op not in _AFFINE_OPS or not any(roles.values()):
        return _OK_UNKNOWN
    if op == "mean":
        kinds = set(roles.values())
        return (kinds.pop(), "", "") if len(kinds) == 1 else _OK_UNKNOWN
    if op == "sum" or op == "add":
        readings = [args[p] for p, r in roles.items() if r == READING]
        if len(readings) >= 2:
            return (UNKNOWN, "temperature_reading_arithmetic",
                    f"{op}: '{readings[0]}' and '{readings[1]}' are both temperature readings; their sum means "
                    f"nothing (a change is their difference, sub)")
        if UNKNOWN in roles.values():
            return _OK_UNKNOWN
        return (READING, "", "") if readings else (CHANGE, "", "")
    # sub(x, y) = x - y
    x, y = roles.get("x", UNKNOWN), roles.get("y", UNKNOWN)
    if x == CHANGE and y == READING:
        return (UNKNOWN, "temperature_reading_arithmetic",
                f"sub: '{args['x']}' is a temperature change and '{args['y']}' a reading; a change minus a "
                f"reading means nothing")
    if x == READING and y == READING:
        return (CHANGE, "", "")
    if x == READING and y == CHANGE:
        return (READING, "", "")
    if x == CHANGE and y == CHANGE:
        return (CHANGE, "", "")
    return _OK_UNKNOWN
