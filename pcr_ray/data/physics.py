"""Procedural physics word problems with gold traces: seeded, 40+ templates over eight topics.

Each template draws values (rounded as a textbook would print them) in mixed units (km/h, g, cm, minutes,
degrees Celsius, microfarads, ...), picks one of several phrasings, may add distractor quantities (given but
not needed), and builds a gold trace over the registered primitives: chains of 1 to 8 steps. The gold answer
is computed separately in plain Python floats (SI), converted into the unit the question asks for; the
tests check that the verifier, run on the trace, reaches the same number. The templates are split by name into
families training may draw and families only evaluations draw (HELDOUT_TEMPLATES).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcr_ray.core.primitives.constants import CONSTANTS
from pcr_ray.core.units import unit_info
from pcr_ray.data.problem import Problem
from pcr_ray.data.sources import data_source

TOPICS: tuple[str, ...] = ("kinematics", "dynamics", "energy", "momentum", "circuits", "thermodynamics", "waves",
                           "optics")

# How a unit may be written in a problem text (the first is the symbol).
_SPELL: dict[str, tuple[str, ...]] = {
    "m/s": ("m/s", "meters per second"), "km/h": ("km/h", "kilometers per hour"), "m/s^2": ("m/s^2",),
    "m": ("m", "meters"), "km": ("km", "kilometers"), "cm": ("cm", "centimeters"), "mm": ("mm",),
    "s": ("s", "seconds"), "minute": ("min", "minutes"), "hour": ("h", "hours"), "kg": ("kg", "kilograms"),
    "g": ("g", "grams"), "N": ("N", "newtons"), "kN": ("kN",), "J": ("J", "joules"), "kJ": ("kJ", "kilojoules"),
    "W": ("W", "watts"), "kW": ("kW", "kilowatts"), "V": ("V", "volts"), "A": ("A", "amperes"),
    "mA": ("mA", "milliamperes"), "ohm": ("ohm", "ohms"), "kohm": ("kohm",), "uF": ("uF", "microfarads"),
    "uC": ("uC", "microcoulombs"), "C": ("C", "coulombs"), "degC": ("°C", "degrees Celsius"), "K": ("K", "kelvin"),
    "Pa": ("Pa", "pascals"), "kPa": ("kPa", "kilopascals"), "atm": ("atm",), "L": ("L", "liters"),
    "mol": ("mol", "moles"), "Hz": ("Hz", "hertz"), "kHz": ("kHz",), "nm": ("nm", "nanometers"),
    "eV": ("eV", "electronvolts"), "degree": ("°", "degrees"), "N/m": ("N/m", "newtons per meter"),
    "kg*m/s": ("kg*m/s",), "N*s": ("N*s",), "mJ": ("mJ",), "kWh": ("kWh",), "USD": ("USD",),
    "USD/kWh": ("USD/kWh",), "1/m": ("1/m",), "cm^2": ("cm^2", "square centimeters"), "m^2": ("m^2",),
    "W/(m*K)": ("W/(m*K)",), "hour/day": ("hours per day", "h/day"), "day": ("days",),
    "ms": ("ms", "milliseconds"), "uJ": ("uJ",), "mW": ("mW",), "mm^2": ("mm^2",),
}


def _round_sig(x: float, sig: int) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    d = sig - int(math.floor(math.log10(abs(x)))) - 1
    return round(x, d)


def _fmt(x: float) -> str:
    s = f"{x:.6g}"
    if "e" in s:
        mant, exp = s.split("e")
        return f"{mant} x 10^{int(exp)}"
    return s


@dataclass(slots=True)
class _Build:
    """Collects one problem: text parts, givens (+ their SI values), steps, and the answer."""

    rng: random.Random
    topic: str
    givens: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    si: dict[str, float] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    n_distractors: int = 0
    ask_unit: str = ""
    answer_name: str = ""
    _distraction: str | None = None

    def _name(self, base: str) -> str:
        name, k = base, 2
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def q(self, name: str, si_value: float, units: tuple[str, ...] | str, desc: str, sig: int = 2,
          exact: bool = False) -> tuple[str, str]:
        """A given: the SI value shown in one of `units`, rounded to `sig` digits. Returns (name, text)."""
        unit = units if isinstance(units, str) else self.rng.choice(units)
        info = unit_info(unit)
        shown = info.from_base(si_value)
        shown = shown if exact else _round_sig(shown, sig)
        if float(shown).is_integer() and abs(shown) < 1e15:
            shown = float(int(shown))
        nm = self._name(name)
        self.givens.append({"name": nm, "value": shown, "unit": unit, "desc": desc})
        self.si[nm] = info.to_base(shown)
        if unit == "dimensionless":
            return nm, _fmt(shown)
        spell = self.rng.choice(_SPELL.get(unit, (unit,)))
        sep = "" if spell in ("°",) else " "
        return nm, f"{_fmt(shown)}{sep}{spell}"

    def const(self, cname: str) -> str:
        """A `const` step bringing in a named constant."""
        nm = self._name(cname if cname not in ("e", "c", "h") else f"{cname}_const")
        value, unit, _ = CONSTANTS[cname]
        self.steps.append({"op": "const", "args": {"name": cname}, "out": {"name": nm, "unit": unit}})
        self.si[nm] = unit_info(unit).to_base(value)
        return nm

    def step(self, op: str, out: str, unit: str, si_value: float, **args: Any) -> str:
        """A step; `si_value` is the independently computed value (SI) kept for the answer check."""
        nm = self._name(out)
        self.steps.append({"op": op, "args": args, "out": {"name": nm, "unit": unit}})
        self.si[nm] = si_value
        return nm

    def distract(self, pool: list[tuple[str, float, tuple[str, ...], str]], p: float = 0.6) -> str:
        """Maybe add a distractor sentence: (name, SI value, units, sentence with {q}) from `pool`."""
        if self._distraction is not None:
            return self._distraction
        self._distraction = ""
        if self.rng.random() >= p:
            return ""
        name, si_value, units, sentence = self.rng.choice(pool)
        nm, txt = self.q(name, si_value, units, "distractor (not needed)")
        self.givens[-1]["desc"] = "not needed: " + sentence.split("{q}")[0].strip()[:40]
        self.n_distractors += 1
        del nm
        self._distraction = " " + sentence.format(q=txt)
        return self._distraction

    def ask(self, name: str, units: tuple[str, ...] | str) -> tuple[str, str]:
        """Declare the answer; returns (unit, phrase like 'in km/h')."""
        unit = units if isinstance(units, str) else self.rng.choice(units)
        self.ask_unit, self.answer_name = unit, name
        spell = self.rng.choice(_SPELL.get(unit, (unit,)))
        return unit, self.rng.choice((f"in {spell}", f"in {spell}", f"(in {spell})"))

    def trace(self) -> dict[str, Any]:
        return {"givens": self.givens, "steps": self.steps, "answer": [{"name": self.answer_name,
                                                                         "unit": self.ask_unit}]}


@dataclass(frozen=True, slots=True)
class Template:
    """A named problem template of one topic; `make(build)` writes the text and fills the trace.

    `assumptions` maps each condition the problem states (friction, air resistance, heat loss, efficiency) to
    the givens that carry it, which a correct solution must use; `core` is False for the templates outside the
    default mix (see MIXES).
    """

    name: str
    topic: str
    make: Callable[[_Build], str]
    assumptions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    core: bool = True


TEMPLATES: list[Template] = []

# Which templates generate_problems draws from: 'core' (the default, the original set), 'assumption' (every
# template whose problem states a condition the solution must use), 'all' (both).
MIXES: tuple[str, ...] = ("core", "assumption", "all")

# The template split: the held-out families are drawn only by evaluations (split='heldout'); everything that trains
# (PRM pairs, CSP and mined negatives, the SFT corpus) draws the rest (split='train'), so no evaluated template, op
# chain or wording is ever trained on, whatever the seed. Held out wholly: the optics topic (its principles: thin
# lens, refraction, critical angle, lens power) and the air-resistance condition (its one template); held out in part:
# about a quarter of every other topic's templates, long and short chains, core and condition ones alike. The split
# is fixed here, by name, never by seed (docs/data.md, Generated physics; tests/test_data_split.py checks every
# config that trains or evaluates against it).
SPLITS: tuple[str, ...] = ("train", "heldout", "all")
HELDOUT_TOPICS: frozenset[str] = frozenset({"optics"})
HELDOUT_TEMPLATES: frozenset[str] = frozenset({
    "stopping_distance", "projectile_range", "catch_up", "sprint",            # kinematics
    "incline_slide", "atwood", "pressure_weight",                            # dynamics
    "work_angle", "spring_launch", "drag_fall_speed", "pump_efficiency_power",  # energy
    "elastic_collision", "recoil",                                           # momentum
    "mixed_circuit", "rc_discharge", "voltage_divider",                      # circuits
    "charles", "carnot_work", "heater_heat_loss",                            # thermodynamics
    "pendulum_swings", "string_harmonic",                                    # waves
})


def template(name: str, topic: str, assumptions: Mapping[str, Sequence[str]] | None = None, core: bool = True
             ) -> Callable[[Callable[[_Build], str]], Callable[[_Build], str]]:
    def deco(fn: Callable[[_Build], str]) -> Callable[[_Build], str]:
        conds = {str(k): tuple(v) for k, v in (assumptions or {}).items()}
        TEMPLATES.append(Template(name, topic, fn, conds, core))
        return fn
    return deco


def _u(x: float, lo: float, hi: float) -> float:
    return x * (hi - lo) + lo


# distractor pools, per topic (name, SI value range drawn by the caller, units, sentence)
def _pool(b: _Build) -> list[tuple[str, float, tuple[str, ...], str]]:
    r = b.rng
    return [
        ("T_air", 273.15 + r.randint(5, 35), ("degC",), "The air temperature is {q}."),
        ("width", r.randint(5, 80) / 100, ("cm",), "The object is {q} wide."),
        ("m_extra", r.randint(2, 90) / 10, ("kg",), "A {q} toolbox sits nearby but plays no part."),
        ("t_wait", 60 * r.randint(2, 30), ("minute",), "The experiment starts after a wait of {q}."),
        ("h_room", r.randint(25, 40) / 10, ("m",), "The room is {q} high."),
        ("f_hum", 50.0, ("Hz",), "The lab's mains hum is at {q}."),
    ]


# ---------------------------------------------------------------- kinematics

@template("final_speed", "kinematics")
def _t_final_speed(b: _Build) -> str:
    r = b.rng
    a_si, t_si = _u(r.random(), 0.5, 4.0), r.randint(3, 20)
    a, at = b.q("a", a_si, "m/s^2", "acceleration")
    t, tt = b.q("t", t_si, "s", "duration")
    v0 = b.q("v0", 0.0, "m/s", "starts from rest", exact=True)[0]
    v = b.step("kin_final_velocity", "v", "m/s", b.si[a] * b.si[t], v0=v0, a=a, t=t)
    _, ph = b.ask(v, ("m/s", "km/h"))
    return r.choice([
        f"A car starts from rest and accelerates uniformly at {at} for {tt}.{b.distract(_pool(b))} "
        f"What is its final speed {ph}?",
        f"Starting from rest, a cyclist speeds up at {at} for {tt}.{b.distract(_pool(b))} How fast is the "
        f"cyclist moving at the end, {ph}?",
    ])


@template("distance_accel", "kinematics")
def _t_distance_accel(b: _Build) -> str:
    r = b.rng
    v0, v0t = b.q("v0", _u(r.random(), 2, 20), ("m/s", "km/h"), "initial speed")
    a, at = b.q("a", _u(r.random(), 0.5, 3), "m/s^2", "acceleration")
    t, tt = b.q("t", r.randint(4, 30), ("s", "minute") if r.random() < 0.2 else "s", "duration")
    d_si = b.si[v0] * b.si[t] + 0.5 * b.si[a] * b.si[t] ** 2
    d = b.step("kin_displacement", "d", "m", d_si, v0=v0, a=a, t=t)
    _, ph = b.ask(d, ("m", "km"))
    return r.choice([
        f"A train moving at {v0t} accelerates at {at} for {tt}.{b.distract(_pool(b))} How far does it travel "
        f"during that time, {ph}?",
        f"An object with an initial velocity of {v0t} has a constant acceleration of {at}.{b.distract(_pool(b))} "
        f"What distance does it cover in {tt} {ph}?",
    ])


@template("average_speed", "kinematics")
def _t_average_speed(b: _Build) -> str:
    r = b.rng
    d, dt = b.q("d", r.randint(3, 60) * 1000.0, ("km",), "distance")
    t, tt = b.q("t", r.randint(10, 90) * 60.0, ("minute",), "time taken")
    v = b.step("average_speed", "v_avg", "m/s", b.si[d] / b.si[t], d=d, t=t)
    _, ph = b.ask(v, ("km/h", "m/s"))
    return (f"A runner covers {dt} in {tt}.{b.distract(_pool(b))} What is the runner's average speed {ph}?")


@template("stopping_distance", "kinematics")
def _t_stopping_distance(b: _Build) -> str:
    r = b.rng
    v0, v0t = b.q("v0", r.randint(30, 120) / 3.6, "km/h", "initial speed")
    dec, dect = b.q("a_brake", _u(r.random(), 3, 8), "m/s^2", "braking deceleration (magnitude)")
    v = b.q("v", 0.0, "m/s", "comes to a stop", exact=True)[0]
    a = b.step("neg", "a", "m/s^2", -b.si[dec], x=dec)
    d = b.step("kin_displacement_from_velocities", "d_stop", "m", b.si[v0] ** 2 / (2 * b.si[dec]), v0=v0, v=v, a=a)
    _, ph = b.ask(d, ("m",))
    return r.choice([
        f"A driver traveling at {v0t} brakes with a constant deceleration of {dect} until the car comes to a "
        f"stop.{b.distract(_pool(b))} What is the stopping distance {ph}?",
        f"A car moving at {v0t} decelerates at {dect} and stops.{b.distract(_pool(b))} How far does it go while "
        f"braking {ph}?",
    ])


@template("free_fall_time", "kinematics")
def _t_free_fall_time(b: _Build) -> str:
    r = b.rng
    h, ht = b.q("h", r.randint(5, 120), ("m",), "drop height")
    g = b.const("g")
    t = b.step("free_fall_time", "t", "s", math.sqrt(2 * b.si[h] / b.si[g]), d=h, g=g)
    _, ph = b.ask(t, ("s", "ms"))
    return (f"A stone is dropped from rest from a height of {ht}.{b.distract(_pool(b))} Ignoring air "
            f"resistance, how long does it take to reach the ground {ph}?")


@template("free_fall_speed", "kinematics")
def _t_free_fall_speed(b: _Build) -> str:
    r = b.rng
    h, ht = b.q("h", r.randint(2, 80), ("m", "cm") if r.random() < 0.3 else "m", "drop height")
    g = b.const("g")
    v = b.step("free_fall_velocity", "v", "m/s", math.sqrt(2 * b.si[g] * b.si[h]), g=g, d=h)
    _, ph = b.ask(v, ("m/s", "km/h"))
    return (f"A ball falls from rest through {ht}.{b.distract(_pool(b))} What is its speed just before it "
            f"lands {ph}?")


@template("projectile_range", "kinematics")
def _t_projectile_range(b: _Build) -> str:
    r = b.rng
    v0, v0t = b.q("v0", r.randint(8, 40), ("m/s",), "launch speed")
    th, tht = b.q("theta", math.radians(r.choice([15, 20, 25, 30, 35, 40, 45, 50, 60])), "degree", "launch angle")
    g = b.const("g")
    rng_si = b.si[v0] ** 2 * math.sin(2 * b.si[th]) / b.si[g]
    d = b.step("projectile_range", "range_", "m", rng_si, v0=v0, theta=th, g=g)
    _, ph = b.ask(d, ("m",))
    return (f"A ball is launched at {v0t} at an angle of {tht} above the horizontal over level ground."
            f"{b.distract(_pool(b))} How far away does it land {ph}?")


@template("two_phase_trip", "kinematics")
def _t_two_phase(b: _Build) -> str:
    r = b.rng
    v0 = b.q("v0", 0.0, "m/s", "starts from rest", exact=True)[0]
    a, at = b.q("a", _u(r.random(), 0.5, 3), "m/s^2", "acceleration")
    t1, t1t = b.q("t1", r.randint(5, 20), "s", "time accelerating")
    t2, t2t = b.q("t2", r.randint(1, 10) * 60.0, ("minute", "s"), "time at constant speed")
    v = b.step("kin_final_velocity", "v", "m/s", b.si[a] * b.si[t1], v0=v0, a=a, t=t1)
    d1 = b.step("kin_displacement", "d1", "m", 0.5 * b.si[a] * b.si[t1] ** 2, v0=v0, a=a, t=t1)
    d2 = b.step("distance_speed_time", "d2", "m", b.si[v] * b.si[t2], v=v, t=t2)
    d = b.step("add", "d_total", "m", b.si[d1] + b.si[d2], x=d1, y=d2)
    _, ph = b.ask(d, ("m", "km"))
    return (f"A tram starts from rest and accelerates at {at} for {t1t}, then keeps that speed for {t2t}."
            f"{b.distract(_pool(b))} What total distance does it cover {ph}?")


@template("accelerate_then_brake", "kinematics")
def _t_accel_brake(b: _Build) -> str:
    r = b.rng
    v0 = b.q("v0", 0.0, "m/s", "starts from rest", exact=True)[0]
    a, at = b.q("a", _u(r.random(), 1, 3), "m/s^2", "acceleration")
    t1, t1t = b.q("t1", r.randint(5, 15), "s", "time accelerating")
    dec, dect = b.q("a_brake", _u(r.random(), 2, 6), "m/s^2", "braking deceleration (magnitude)")
    vend = b.q("v_end", 0.0, "m/s", "comes to a stop", exact=True)[0]
    vmax_si = b.si[a] * b.si[t1]
    vmax = b.step("kin_final_velocity", "v_max", "m/s", vmax_si, v0=v0, a=a, t=t1)
    d1 = b.step("kin_displacement", "d1", "m", 0.5 * b.si[a] * b.si[t1] ** 2, v0=v0, a=a, t=t1)
    ab = b.step("neg", "a2", "m/s^2", -b.si[dec], x=dec)
    d2 = b.step("kin_displacement_from_velocities", "d2", "m", vmax_si ** 2 / (2 * b.si[dec]), v0=vmax, v=vend,
                a=ab)
    t2 = b.step("kin_time_from_velocities", "t2", "s", vmax_si / b.si[dec], v0=vmax, v=vend, a=ab)
    d = b.step("add", "d_total", "m", b.si[d1] + b.si[d2], x=d1, y=d2)
    t = b.step("add", "t_total", "s", b.si[t1] + b.si[t2], x=t1, y=t2)
    vavg = b.step("average_speed", "v_avg", "m/s", b.si[d] / b.si[t], d=d, t=t)
    _, ph = b.ask(vavg, ("m/s", "km/h"))
    return (f"A subway train starts from rest and accelerates at {at} for {t1t}. It then brakes at {dect} until "
            f"it comes to a stop.{b.distract(_pool(b))} What is its average speed for the whole trip {ph}?")


@template("catch_up", "kinematics")
def _t_catch_up(b: _Build) -> str:
    r = b.rng
    v1, v1t = b.q("v1", r.randint(70, 120) / 3.6, "km/h", "faster car speed")
    v2, v2t = b.q("v2", r.randint(40, 65) / 3.6, "km/h", "slower car speed")
    d, dt = b.q("d", r.randint(2, 20) * 1000.0, "km", "head start")
    vr = b.step("relative_velocity", "v_rel", "m/s", b.si[v1] - b.si[v2], va=v1, vb=v2)
    t = b.step("time_from_distance", "t", "s", b.si[d] / b.si[vr], d=d, v=vr)
    _, ph = b.ask(t, ("minute", "hour"))
    return (f"A truck traveling at {v2t} has a head start of {dt} on a car traveling at {v1t} in the same "
            f"direction.{b.distract(_pool(b))} How long does the car take to catch up, {ph}?")


@template("centripetal_accel", "kinematics")
def _t_centripetal_accel(b: _Build) -> str:
    r = b.rng
    v, vt = b.q("v", r.randint(20, 90) / 3.6, ("km/h", "m/s"), "speed")
    rad, radt = b.q("r", r.randint(20, 200), "m", "radius of the curve")
    a = b.step("centripetal_acceleration", "a_c", "m/s^2", b.si[v] ** 2 / b.si[rad], v=v, r=rad)
    _, ph = b.ask(a, "m/s^2")
    return (f"A car takes a circular curve of radius {radt} at a constant {vt}.{b.distract(_pool(b))} What is "
            f"its centripetal acceleration {ph}?")


@template("accel_from_distance", "kinematics")
def _t_accel_from_distance(b: _Build) -> str:
    r = b.rng
    v0, v0t = b.q("v0", r.randint(0, 10), "m/s", "initial speed")
    v, vt = b.q("v", r.randint(15, 40), "m/s", "final speed")
    d, dt = b.q("d", r.randint(50, 400), "m", "distance")
    a = b.step("kin_accel_from_distance", "a", "m/s^2", (b.si[v] ** 2 - b.si[v0] ** 2) / (2 * b.si[d]),
               v0=v0, v=v, d=d)
    _, ph = b.ask(a, "m/s^2")
    return (f"A motorcycle speeds up from {v0t} to {vt} over a distance of {dt}.{b.distract(_pool(b))} What is "
            f"its acceleration, assumed constant, {ph}?")


@template("sprint", "kinematics")
def _t_sprint(b: _Build) -> str:
    r = b.rng
    v0 = b.q("v0", 0.0, "m/s", "starts from rest", exact=True)[0]
    v, vt = b.q("v", r.randint(8, 11), "m/s", "top speed")
    d1, d1t = b.q("d1", r.randint(15, 40), "m", "distance to reach top speed")
    d, dt = b.q("d", r.choice([100, 200]), "m", "race distance")
    a_si = b.si[v] ** 2 / (2 * b.si[d1])
    a = b.step("kin_accel_from_distance", "a", "m/s^2", a_si, v0=v0, v=v, d=d1)
    t1 = b.step("kin_time_from_velocities", "t1", "s", b.si[v] / a_si, v0=v0, v=v, a=a)
    d2 = b.step("sub", "d2", "m", b.si[d] - b.si[d1], x=d, y=d1)
    t2 = b.step("time_from_distance", "t2", "s", (b.si[d] - b.si[d1]) / b.si[v], d=d2, v=v)
    t = b.step("add", "t_total", "s", b.si[v] / a_si + (b.si[d] - b.si[d1]) / b.si[v], x=t1, y=t2)
    _, ph = b.ask(t, "s")
    return (f"A sprinter starts from rest, accelerates uniformly to a top speed of {vt} over the first {d1t}, and "
            f"holds that speed to the end of the {dt} race.{b.distract(_pool(b))} What is the finishing time "
            f"{ph}?")


@template("ski_slope_runout", "kinematics", assumptions={"friction": ["mu"]})
def _t_ski(b: _Build) -> str:
    r = b.rng
    h, ht = b.q("h", r.randint(5, 40), "m", "height of the slope")
    mu, mut = b.q("mu", r.choice([0.05, 0.08, 0.1, 0.15]), "dimensionless", "kinetic friction on the flat")
    vend = b.q("v_end", 0.0, "m/s", "comes to a stop", exact=True)[0]
    g = b.const("g")
    v_si = math.sqrt(2 * b.si[g] * b.si[h])
    dec_si = b.si[mu] * b.si[g]
    v = b.step("energy_conservation_speed", "v", "m/s", v_si, g=g, h=h)
    dec = b.step("mul", "a_mag", "m/s^2", dec_si, x=mu, y=g)
    a = b.step("neg", "a", "m/s^2", -dec_si, x=dec)
    d = b.step("kin_displacement_from_velocities", "d", "m", v_si ** 2 / (2 * dec_si), v0=v, v=vend, a=a)
    t = b.step("kin_time_from_velocities", "t", "s", v_si / dec_si, v0=v, v=vend, a=a)
    if r.random() < 0.5:
        _, ph = b.ask(d, ("m", "km"))
        q = f"How far along the flat does the skier glide {ph}?"
    else:
        _, ph = b.ask(t, "s")
        q = f"How long does the skier glide on the flat before stopping, {ph}?"
    return (f"A skier starts from rest at the top of a frictionless slope {ht} high and then glides onto level "
            f"snow where the coefficient of kinetic friction is {mut} until she comes to a stop."
            f"{b.distract(_pool(b))} {q}")


# ---------------------------------------------------------------- dynamics

@template("newton_force", "dynamics")
def _t_newton_force(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(200, 5000) / 1000, ("g", "kg"), "mass")
    a, at = b.q("a", _u(r.random(), 0.5, 6), "m/s^2", "acceleration")
    f = b.step("newton_force", "F", "N", b.si[m] * b.si[a], m=m, a=a)
    _, ph = b.ask(f, ("N", "mN") if b.si[m] < 1 else "N")
    return r.choice([
        f"What net force is needed to give a {mt} cart an acceleration of {at}?{b.distract(_pool(b))} Give the "
        f"force {ph}.",
        f"A {mt} block accelerates at {at}.{b.distract(_pool(b))} What net force acts on it {ph}?",
    ])


@template("friction_accel", "dynamics", assumptions={"friction": ["mu"]})
def _t_friction_accel(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(2, 30), "kg", "mass")
    mu, mut = b.q("mu", r.choice([0.1, 0.15, 0.2, 0.25, 0.3]), "dimensionless", "kinetic friction coefficient")
    g = b.const("g")
    w_si = b.si[m] * b.si[g]
    fa, fat = b.q("F_app", w_si * _u(r.random(), 0.5, 1.2), "N", "applied force", sig=3)
    w = b.step("weight", "W", "N", w_si, m=m, g=g)
    fr = b.step("friction_force", "f_k", "N", b.si[mu] * w_si, mu=mu, n=w)
    fnet = b.step("sub", "F_net", "N", b.si[fa] - b.si[mu] * w_si, x=fa, y=fr)
    a = b.step("newton_accel", "a", "m/s^2", (b.si[fa] - b.si[mu] * w_si) / b.si[m], f=fnet, m=m)
    _, ph = b.ask(a, "m/s^2")
    return (f"A {mt} crate on a level floor is pushed horizontally with a force of {fat}. The coefficient of "
            f"kinetic friction is {mut}.{b.distract(_pool(b))} What is the crate's acceleration {ph}?")


@template("incline_slide", "dynamics", assumptions={"friction": ["mu"]})
def _t_incline(b: _Build) -> str:
    r = b.rng
    th, tht = b.q("theta", math.radians(r.choice([25, 30, 35, 40, 45])), "degree", "incline angle")
    mu, mut = b.q("mu", r.choice([0.05, 0.1, 0.15, 0.2]), "dimensionless", "kinetic friction coefficient")
    t, tt = b.q("t", r.randint(2, 6), "s", "time")
    v0 = b.q("v0", 0.0, "m/s", "released from rest", exact=True)[0]
    g = b.const("g")
    a_si = b.si[g] * (math.sin(b.si[th]) - b.si[mu] * math.cos(b.si[th]))
    a = b.step("incline_acceleration", "a", "m/s^2", a_si, g=g, theta=th, mu=mu)
    d = b.step("kin_displacement", "d", "m", 0.5 * a_si * b.si[t] ** 2, v0=v0, a=a, t=t)
    _, ph = b.ask(d, ("m", "cm"))
    return (f"A block is released from rest on a ramp inclined at {tht}. The coefficient of kinetic friction is "
            f"{mut}.{b.distract(_pool(b))} How far down the ramp does it slide in {tt}, {ph}?")


@template("weight", "dynamics")
def _t_weight(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(500, 90000) / 1000, ("g", "kg"), "mass")
    g = b.const("g")
    w = b.step("weight", "W", "N", b.si[m] * b.si[g], m=m, g=g)
    _, ph = b.ask(w, "N")
    return f"What is the weight of a {mt} package on Earth's surface {ph}?{b.distract(_pool(b))}"


@template("spring_hang", "dynamics")
def _t_spring_hang(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(50, 900) / 1000, "g", "hanging mass")
    k, kt = b.q("k", r.randint(20, 400), "N/m", "spring constant")
    g = b.const("g")
    w = b.step("weight", "W", "N", b.si[m] * b.si[g], m=m, g=g)
    x = b.step("spring_extension", "x", "m", b.si[m] * b.si[g] / b.si[k], f=w, k=k)
    _, ph = b.ask(x, ("cm", "mm"))
    return (f"A {mt} mass hangs at rest from a spring with spring constant {kt}.{b.distract(_pool(b))} How "
            f"much is the spring stretched {ph}?")


@template("elevator_tension", "dynamics")
def _t_elevator(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(300, 1500), "kg", "elevator mass")
    a, at = b.q("a", _u(r.random(), 0.3, 2), "m/s^2", "upward acceleration")
    g = b.const("g")
    t = b.step("tension_hanging", "T", "N", b.si[m] * (b.si[g] + b.si[a]), m=m, g=g, a=a)
    _, ph = b.ask(t, ("N", "kN"))
    return (f"An elevator of mass {mt} accelerates upward at {at}.{b.distract(_pool(b))} What is the tension in "
            f"its cable {ph}?")


@template("atwood", "dynamics")
def _t_atwood(b: _Build) -> str:
    r = b.rng
    m1, m1t = b.q("m1", r.randint(3, 10), "kg", "heavier mass")
    m2, m2t = b.q("m2", r.randint(1, 2), "kg", "lighter mass")
    t, tt = b.q("t", r.randint(1, 4), "s", "time")
    v0 = b.q("v0", 0.0, "m/s", "released from rest", exact=True)[0]
    g = b.const("g")
    a_si = (b.si[m1] - b.si[m2]) * b.si[g] / (b.si[m1] + b.si[m2])
    a = b.step("atwood_acceleration", "a", "m/s^2", a_si, m1=m1, m2=m2, g=g)
    v = b.step("kin_final_velocity", "v", "m/s", a_si * b.si[t], v0=v0, a=a, t=t)
    _, ph = b.ask(v, "m/s")
    return (f"Masses of {m1t} and {m2t} hang on either side of a frictionless pulley and are released from "
            f"rest.{b.distract(_pool(b))} How fast are they moving after {tt}, {ph}?")


@template("centripetal_force", "dynamics")
def _t_centripetal_force(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(100, 2000) / 1000, ("g", "kg"), "mass")
    v, vt = b.q("v", r.randint(2, 15), "m/s", "speed")
    rad, radt = b.q("r", r.randint(30, 200) / 100, ("cm", "m"), "radius")
    f = b.step("centripetal_force", "F_c", "N", b.si[m] * b.si[v] ** 2 / b.si[rad], m=m, v=v, r=rad)
    _, ph = b.ask(f, "N")
    return (f"A {mt} ball on a string moves in a horizontal circle of radius {radt} at {vt}."
            f"{b.distract(_pool(b))} What is the tension providing the centripetal force {ph}?")


@template("pressure_weight", "dynamics")
def _t_pressure(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(2, 80), "kg", "mass")
    area, areat = b.q("A", r.randint(10, 400) / 1e4, "cm^2", "contact area")
    g = b.const("g")
    w = b.step("weight", "W", "N", b.si[m] * b.si[g], m=m, g=g)
    p = b.step("pressure", "p", "Pa", b.si[m] * b.si[g] / b.si[area], f=w, area=area)
    _, ph = b.ask(p, ("Pa", "kPa"))
    return (f"A {mt} statue rests on a base with a contact area of {areat}.{b.distract(_pool(b))} What pressure "
            f"does it exert on the floor {ph}?")


# ---------------------------------------------------------------- energy

@template("kinetic_energy", "energy")
def _t_kinetic(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(50, 2000) / 1000 if r.random() < 0.5 else r.randint(500, 2000),
                ("g", "kg"), "mass")
    v, vt = b.q("v", r.randint(5, 40) if b.si[m] < 5 else r.randint(30, 120) / 3.6, ("m/s", "km/h"), "speed")
    ke = b.step("kinetic_energy", "KE", "J", 0.5 * b.si[m] * b.si[v] ** 2, m=m, v=v)
    _, ph = b.ask(ke, ("J", "kJ"))
    return r.choice([
        f"What is the kinetic energy of a {mt} object moving at {vt}?{b.distract(_pool(b))} Answer {ph}.",
        f"An object of mass {mt} travels at {vt}.{b.distract(_pool(b))} Find its kinetic energy {ph}.",
    ])


@template("potential_energy", "energy")
def _t_potential(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(1, 60), "kg", "mass")
    h, ht = b.q("h", r.randint(2, 50), ("m", "cm") if r.random() < 0.2 else "m", "height")
    g = b.const("g")
    pe = b.step("potential_energy", "PE", "J", b.si[m] * b.si[g] * b.si[h], m=m, g=g, h=h)
    _, ph = b.ask(pe, ("J", "kJ"))
    return (f"A {mt} box is lifted {ht} above the floor.{b.distract(_pool(b))} By how much does its "
            f"gravitational potential energy increase {ph}?")


@template("energy_conservation_drop", "energy")
def _t_energy_drop(b: _Build) -> str:
    r = b.rng
    h, ht = b.q("h", r.randint(3, 60), "m", "height of the drop")
    g = b.const("g")
    v = b.step("energy_conservation_speed", "v", "m/s", math.sqrt(2 * b.si[g] * b.si[h]), g=g, h=h)
    _, ph = b.ask(v, ("m/s", "km/h"))
    return (f"A roller coaster car starts from rest at the top of a {ht} drop. Neglecting friction, how fast is it "
            f"moving at the bottom {ph}?{b.distract(_pool(b))}")


@template("work_angle", "energy")
def _t_work_angle(b: _Build) -> str:
    r = b.rng
    f, ft = b.q("F", r.randint(10, 200), "N", "pulling force")
    d, dt = b.q("d", r.randint(2, 50), "m", "distance")
    th, tht = b.q("theta", math.radians(r.choice([0, 20, 30, 37, 45, 60])), "degree", "angle of the rope")
    w = b.step("work_angle", "W", "J", b.si[f] * b.si[d] * math.cos(b.si[th]), f=f, d=d, theta=th)
    _, ph = b.ask(w, ("J", "kJ"))
    return (f"A sled is pulled {dt} along level snow by a rope at {tht} above the horizontal with a tension of "
            f"{ft}.{b.distract(_pool(b))} How much work does the rope do {ph}?")


@template("lifting_power", "energy")
def _t_lifting_power(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(50, 800), "kg", "load mass")
    h, ht = b.q("h", r.randint(5, 40), "m", "height")
    t, tt = b.q("t", r.randint(10, 120), ("s", "minute") if r.random() < 0.3 else "s", "time")
    g = b.const("g")
    pe = b.step("potential_energy", "E", "J", b.si[m] * b.si[g] * b.si[h], m=m, g=g, h=h)
    p = b.step("power", "P", "W", b.si[pe] / b.si[t], w=pe, t=t)
    _, ph = b.ask(p, ("W", "kW"))
    return (f"A crane lifts a {mt} load {ht} at constant speed in {tt}.{b.distract(_pool(b))} What average "
            f"power does it deliver {ph}?")


@template("motor_efficiency", "energy")
def _t_motor_eff(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(20, 200), "kg", "load mass")
    h, ht = b.q("h", r.randint(3, 20), "m", "height")
    g = b.const("g")
    e_out = b.si[m] * b.si[g] * b.si[h]
    p, pt = b.q("P_in", e_out / _u(r.random(), 0.4, 0.9) / 30, ("W", "kW"), "electrical input power", sig=3)
    t, tt = b.q("t", 30.0, "s", "time")
    pe = b.step("potential_energy", "E_out", "J", e_out, m=m, g=g, h=h)
    ein = b.step("energy_from_power", "E_in", "J", b.si[p] * b.si[t], p=p, t=t)
    eta = b.step("efficiency", "eta", "dimensionless", e_out / (b.si[p] * b.si[t]), e_out=pe, e_in=ein)
    _, ph = b.ask(eta, ("percent", "dimensionless"))
    return (f"An electric winch draws {pt} for {tt} while raising a {mt} load by {ht}.{b.distract(_pool(b))} "
            f"What is its efficiency{' in percent' if b.ask_unit == 'percent' else ' (as a fraction)'}?")


@template("spring_launch", "energy")
def _t_spring_launch(b: _Build) -> str:
    r = b.rng
    k, kt = b.q("k", r.randint(100, 2000), "N/m", "spring constant")
    x, xt = b.q("x", r.randint(2, 20) / 100, "cm", "compression")
    m, mt = b.q("m", r.randint(50, 500) / 1000, "g", "mass")
    g = b.const("g")
    e_si = 0.5 * b.si[k] * b.si[x] ** 2
    e = b.step("spring_energy", "E_s", "J", e_si, k=k, x=x)
    v = b.step("speed_from_kinetic_energy", "v", "m/s", math.sqrt(2 * e_si / b.si[m]), ke=e, m=m)
    h = b.step("height_from_potential_energy", "h", "m", e_si / (b.si[m] * b.si[g]), pe=e, m=m, g=g)
    del v
    _, ph = b.ask(h, ("m", "cm"))
    return (f"A spring with constant {kt} is compressed by {xt} and launches a {mt} ball straight up."
            f"{b.distract(_pool(b))} Ignoring air resistance, how high does the ball rise {ph}?")


@template("friction_stop_work", "energy", assumptions={"friction": ["mu"]})
def _t_friction_work(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(2, 20), "kg", "mass")
    mu, mut = b.q("mu", r.choice([0.1, 0.2, 0.3]), "dimensionless", "kinetic friction coefficient")
    d, dt = b.q("d", r.randint(1, 5), "m", "sliding distance")
    g = b.const("g")
    w_si = b.si[m] * b.si[g]
    fr_si = b.si[mu] * w_si
    v0, v0t = b.q("v0", math.sqrt(2 * fr_si * b.si[d] / b.si[m]) * _u(r.random(), 1.2, 2.0), "m/s",
                  "initial speed")
    w = b.step("weight", "N_f", "N", w_si, m=m, g=g)
    fr = b.step("friction_force", "f_k", "N", fr_si, mu=mu, n=w)
    wk = b.step("work", "W_f", "J", fr_si * b.si[d], f=fr, d=d)
    wn = b.step("neg", "W_net", "J", -fr_si * b.si[d], x=wk)
    v = b.step("work_energy_final_speed", "v", "m/s", math.sqrt(b.si[v0] ** 2 - 2 * fr_si * b.si[d] / b.si[m]),
               m=m, v0=v0, w=wn)
    _, ph = b.ask(v, "m/s")
    return (f"A {mt} puck slides across a rough floor with an initial speed of {v0t}. The coefficient of kinetic "
            f"friction is {mut}.{b.distract(_pool(b))} What is its speed after sliding {dt}, {ph}?")


# ---------------------------------------------------------------- momentum

@template("momentum", "momentum")
def _t_momentum(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(50, 3000) / 1000 if r.random() < 0.5 else r.randint(800, 2000), ("g", "kg"), "mass")
    v, vt = b.q("v", r.randint(2, 40), ("m/s", "km/h"), "speed")
    p = b.step("momentum", "p", "kg*m/s", b.si[m] * b.si[v], m=m, v=v)
    _, ph = b.ask(p, "kg*m/s")
    return f"What is the momentum of a {mt} object moving at {vt}, {ph}?{b.distract(_pool(b))}"


@template("inelastic_collision", "momentum")
def _t_inelastic(b: _Build) -> str:
    r = b.rng
    m1, m1t = b.q("m1", r.randint(800, 2000), "kg", "moving car mass")
    v1, v1t = b.q("v1", r.randint(20, 70) / 3.6, "km/h", "moving car speed")
    m2, m2t = b.q("m2", r.randint(800, 2500), "kg", "parked car mass")
    v2 = b.q("v2", 0.0, "m/s", "at rest", exact=True)[0]
    vf = b.step("perfectly_inelastic_velocity", "v_f", "m/s", b.si[m1] * b.si[v1] / (b.si[m1] + b.si[m2]),
                m1=m1, v1=v1, m2=m2, v2=v2)
    _, ph = b.ask(vf, ("m/s", "km/h"))
    return (f"A {m1t} car moving at {v1t} hits a parked {m2t} car and they lock together."
            f"{b.distract(_pool(b))} How fast do the wrecks move just after the collision {ph}?")


@template("collision_energy_loss", "momentum")
def _t_collision_loss(b: _Build) -> str:
    r = b.rng
    m1, m1t = b.q("m1", r.randint(1, 8), "kg", "mass of the moving cart")
    v1, v1t = b.q("v1", r.randint(2, 10), "m/s", "speed of the moving cart")
    m2, m2t = b.q("m2", r.randint(1, 8), "kg", "mass of the resting cart")
    v2 = b.q("v2", 0.0, "m/s", "at rest", exact=True)[0]
    vf_si = b.si[m1] * b.si[v1] / (b.si[m1] + b.si[m2])
    vf = b.step("perfectly_inelastic_velocity", "v_f", "m/s", vf_si, m1=m1, v1=v1, m2=m2, v2=v2)
    ke1_si = 0.5 * b.si[m1] * b.si[v1] ** 2
    ke1 = b.step("kinetic_energy", "KE_before", "J", ke1_si, m=m1, v=v1)
    mt_ = b.step("add", "m_total", "kg", b.si[m1] + b.si[m2], x=m1, y=m2)
    ke2_si = 0.5 * (b.si[m1] + b.si[m2]) * vf_si ** 2
    ke2 = b.step("kinetic_energy", "KE_after", "J", ke2_si, m=mt_, v=vf)
    loss = b.step("sub", "KE_lost", "J", ke1_si - ke2_si, x=ke1, y=ke2)
    _, ph = b.ask(loss, ("J", "mJ") if ke1_si < 5 else "J")
    return (f"A {m1t} cart moving at {v1t} collides with a {m2t} cart at rest, and the carts stick together."
            f"{b.distract(_pool(b))} How much kinetic energy is lost in the collision {ph}?")


@template("elastic_collision", "momentum")
def _t_elastic(b: _Build) -> str:
    r = b.rng
    m1, m1t = b.q("m1", r.randint(100, 900) / 1000, "g", "mass of ball 1")
    v1, v1t = b.q("v1", r.randint(2, 9), "m/s", "speed of ball 1")
    m2, m2t = b.q("m2", r.randint(100, 900) / 1000, "g", "mass of ball 2")
    v2 = b.q("v2", 0.0, "m/s", "ball 2 at rest", exact=True)[0]
    v2f = b.step("elastic_collision_v2", "v2_after", "m/s", 2 * b.si[m1] * b.si[v1] / (b.si[m1] + b.si[m2]),
                 m1=m1, v1=v1, m2=m2, v2=v2)
    _, ph = b.ask(v2f, "m/s")
    return (f"A {m1t} ball moving at {v1t} collides elastically head-on with a {m2t} ball at rest."
            f"{b.distract(_pool(b))} What is the speed of the second ball after the collision {ph}?")


@template("impulse_force", "momentum")
def _t_impulse(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(40, 450) / 1000, "g", "ball mass")
    v0, v0t = b.q("v0", 0.0, "m/s", "at rest", exact=True)
    v, vt = b.q("v", r.randint(10, 40), ("m/s", "km/h"), "speed after the kick")
    t, tt = b.q("t", r.randint(5, 50) / 1000, "ms", "contact time")
    j = b.step("impulse_from_momentum_change", "J_imp", "N*s", b.si[m] * b.si[v], m=m, v0=v0, v=v)
    f = b.step("average_force_from_impulse", "F_avg", "N", b.si[m] * b.si[v] / b.si[t], j=j, t=t)
    del v0t
    _, ph = b.ask(f, ("N", "kN"))
    return (f"A {mt} ball at rest is kicked and leaves the foot at {vt}. The foot is in contact with the ball for "
            f"{tt}.{b.distract(_pool(b))} What average force does the foot exert {ph}?")


@template("recoil", "momentum")
def _t_recoil(b: _Build) -> str:
    r = b.rng
    mb, mbt = b.q("m_b", r.randint(5, 50) / 1000, "g", "bullet mass")
    vb, vbt = b.q("v_b", r.randint(200, 900), "m/s", "bullet speed")
    mg, mgt = b.q("m_g", r.randint(2, 8), "kg", "rifle mass")
    p = b.step("momentum", "p", "kg*m/s", b.si[mb] * b.si[vb], m=mb, v=vb)
    v = b.step("velocity_from_momentum", "v_r", "m/s", b.si[mb] * b.si[vb] / b.si[mg], p=p, m=mg)
    _, ph = b.ask(v, ("m/s", "cm/s"))
    return (f"A {mgt} rifle fires a {mbt} bullet at {vbt}.{b.distract(_pool(b))} What is the recoil speed of "
            f"the rifle {ph}?")


# ---------------------------------------------------------------- circuits

@template("ohm_current", "circuits")
def _t_ohm(b: _Build) -> str:
    r = b.rng
    v, vt = b.q("V", r.choice([1.5, 3, 4.5, 6, 9, 12, 24, 120]), "V", "voltage")
    rr, rt = b.q("R", r.randint(10, 5000), ("ohm", "kohm"), "resistance")
    i = b.step("ohm_current", "I", "A", b.si[v] / b.si[rr], v=v, r=rr)
    _, ph = b.ask(i, ("A", "mA"))
    return r.choice([
        f"A {vt} battery is connected across a {rt} resistor.{b.distract(_pool(b))} What current flows {ph}?",
        f"What current flows through a {rt} resistor with {vt} across it, {ph}?{b.distract(_pool(b))}",
    ])


@template("series_power", "circuits")
def _t_series(b: _Build) -> str:
    r = b.rng
    v, vt = b.q("V", r.choice([6, 9, 12, 24]), "V", "battery voltage")
    r1, r1t = b.q("R1", r.randint(10, 100), "ohm", "first resistor")
    r2, r2t = b.q("R2", r.randint(10, 100), "ohm", "second resistor")
    r3, r3t = b.q("R3", r.randint(10, 100), "ohm", "third resistor")
    rs = b.si[r1] + b.si[r2] + b.si[r3]
    req = b.step("series_resistance", "R_eq", "ohm", rs, x1=r1, x2=r2, x3=r3)
    i = b.step("ohm_current", "I", "A", b.si[v] / rs, v=v, r=req)
    p = b.step("power_i2r", "P2", "W", (b.si[v] / rs) ** 2 * b.si[r2], i=i, r=r2)
    _, ph = b.ask(p, ("W", "mW"))
    return (f"Resistors of {r1t}, {r2t} and {r3t} are connected in series to a {vt} battery."
            f"{b.distract(_pool(b))} How much power is dissipated in the {r2t} resistor {ph}?")


@template("parallel_current", "circuits")
def _t_parallel(b: _Build) -> str:
    r = b.rng
    v, vt = b.q("V", r.choice([6, 9, 12, 24]), "V", "voltage")
    r1, r1t = b.q("R1", r.randint(10, 200), "ohm", "first resistor")
    r2, r2t = b.q("R2", r.randint(10, 200), "ohm", "second resistor")
    rp = 1 / (1 / b.si[r1] + 1 / b.si[r2])
    req = b.step("parallel_resistance", "R_eq", "ohm", rp, x1=r1, x2=r2)
    i = b.step("ohm_current", "I", "A", b.si[v] / rp, v=v, r=req)
    p = b.step("electric_power", "P", "W", b.si[v] ** 2 / rp, v=v, i=i)
    _, ph = b.ask(p, "W")
    return (f"Two resistors, {r1t} and {r2t}, are connected in parallel across a {vt} supply."
            f"{b.distract(_pool(b))} What total power does the supply deliver {ph}?")


@template("electricity_cost", "circuits")
def _t_energy_cost(b: _Build) -> str:
    r = b.rng
    p, pt = b.q("P", r.choice([60, 100, 800, 1200, 1500, 2000]), ("W", "kW"), "appliance power")
    t, tt = b.q("t_daily", r.randint(1, 8) / 24, "hour/day", "daily use")
    n, nt = b.q("days", r.choice([7, 30, 31]) * 86400.0, "day", "number of days")
    price, prt = b.q("price", r.choice([0.12, 0.15, 0.2, 0.25]) / 3.6e6, "USD/kWh", "electricity price")
    t_si = b.si[t] * b.si[n]
    tt_ = b.step("mul", "t_on", "hour", t_si, x=t, y=n)
    e = b.step("energy_from_power", "E", "J", b.si[p] * t_si, p=p, t=tt_)
    c = b.step("mul", "cost", "USD", b.si[p] * t_si * b.si[price], x=e, y=price)
    _, ph = b.ask(c, "USD")
    return (f"A {pt} heater runs {tt} for {nt}. Electricity costs {prt}.{b.distract(_pool(b))} What "
            f"does the electricity cost {ph}?")


@template("capacitor_energy", "circuits")
def _t_capacitor(b: _Build) -> str:
    r = b.rng
    c, ct = b.q("C", r.randint(1, 470) * 1e-6, "uF", "capacitance")
    v, vt = b.q("V", r.choice([5, 9, 12, 50, 100, 400]), "V", "voltage")
    if r.random() < 0.5:
        q = b.step("capacitor_charge", "Q", "C", b.si[c] * b.si[v], c=c, v=v)
        _, ph = b.ask(q, ("uC", "C"))
        return f"A {ct} capacitor is charged to {vt}.{b.distract(_pool(b))} How much charge does it hold {ph}?"
    e = b.step("capacitor_energy", "E", "J", 0.5 * b.si[c] * b.si[v] ** 2, c=c, v=v)
    _, ph = b.ask(e, ("J", "mJ"))
    return f"A {ct} capacitor is charged to {vt}.{b.distract(_pool(b))} How much energy does it store {ph}?"


@template("mixed_circuit", "circuits")
def _t_mixed_circuit(b: _Build) -> str:
    r = b.rng
    v, vt = b.q("V", r.choice([6, 9, 12, 24]), "V", "battery voltage")
    r1, r1t = b.q("R1", r.randint(5, 50), "ohm", "series resistor")
    r2, r2t = b.q("R2", r.randint(10, 100), "ohm", "first parallel resistor")
    r3, r3t = b.q("R3", r.randint(10, 100), "ohm", "second parallel resistor")
    rp_si = 1 / (1 / b.si[r2] + 1 / b.si[r3])
    rt_si = b.si[r1] + rp_si
    i_si = b.si[v] / rt_si
    rp = b.step("parallel_resistance", "R_p", "ohm", rp_si, x1=r2, x2=r3)
    rt = b.step("series_resistance", "R_eq", "ohm", rt_si, x1=r1, x2=rp)
    i = b.step("ohm_current", "I", "A", i_si, v=v, r=rt)
    vp = b.step("ohm_voltage", "V_p", "V", i_si * rp_si, i=i, r=rp)
    i2 = b.step("ohm_current", "I2", "A", i_si * rp_si / b.si[r2], v=vp, r=r2)
    p2 = b.step("power_i2r", "P2", "W", (i_si * rp_si / b.si[r2]) ** 2 * b.si[r2], i=i2, r=r2)
    _, ph = b.ask(p2, ("W", "mW"))
    return (f"A {r1t} resistor is in series with a parallel pair of {r2t} and {r3t}; the combination is connected "
            f"to a {vt} battery.{b.distract(_pool(b))} How much power does the {r2t} resistor dissipate {ph}?")


@template("rc_discharge", "circuits")
def _t_rc(b: _Build) -> str:
    r = b.rng
    rr, rt = b.q("R", r.randint(1, 100) * 1000.0, "kohm", "resistance")
    c, ct = b.q("C", r.randint(10, 470) * 1e-6, "uF", "capacitance")
    v0, v0t = b.q("V0", r.choice([5, 9, 12]), "V", "initial voltage")
    tau_si = b.si[rr] * b.si[c]
    t, tt = b.q("t", tau_si * _u(r.random(), 0.3, 2.5), "s", "time", sig=2)
    tau = b.step("rc_time_constant", "tau", "s", tau_si, r=rr, c=c)
    v = b.step("capacitor_discharge_voltage", "V_t", "V", b.si[v0] * math.exp(-b.si[t] / tau_si), v0=v0, t=t,
               tau=tau)
    _, ph = b.ask(v, "V")
    return (f"A {ct} capacitor charged to {v0t} discharges through a {rt} resistor.{b.distract(_pool(b))} What "
            f"is the capacitor's voltage after {tt}, {ph}?")


@template("electrons_through_wire", "circuits")
def _t_electrons(b: _Build) -> str:
    r = b.rng
    i, it = b.q("I", r.randint(5, 900) / 1000, "mA", "current")
    t, tt = b.q("t", r.randint(1, 30) * 60.0, "minute", "time")
    q = b.step("charge_from_current", "Q", "C", b.si[i] * b.si[t], i=i, t=t)
    e = b.const("e")
    n = b.step("div", "N_e", "dimensionless", b.si[i] * b.si[t] / CONSTANTS["e"][0], x=q, y=e)
    _, ph = b.ask(n, "dimensionless")
    return (f"A current of {it} flows in a wire for {tt}.{b.distract(_pool(b))} How many electrons pass a "
            f"point in the wire?")


@template("voltage_divider", "circuits")
def _t_divider(b: _Build) -> str:
    r = b.rng
    v, vt = b.q("Vin", r.choice([5, 9, 12, 15]), "V", "input voltage")
    r1, r1t = b.q("R1", r.randint(1, 100) * 100.0, ("ohm", "kohm"), "top resistor")
    r2, r2t = b.q("R2", r.randint(1, 100) * 100.0, ("ohm", "kohm"), "bottom resistor")
    vo = b.step("voltage_divider", "Vout", "V", b.si[v] * b.si[r2] / (b.si[r1] + b.si[r2]), vin=v, r1=r1, r2=r2)
    _, ph = b.ask(vo, "V")
    return (f"A voltage divider has {r1t} on top and {r2t} on the bottom, fed from {vt}.{b.distract(_pool(b))} "
            f"What is the output voltage across the bottom resistor {ph}?")


# ---------------------------------------------------------------- thermodynamics

@template("heat_water", "thermodynamics")
def _t_heat_water(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(100, 3000) / 1000, ("g", "kg"), "water mass")
    t1, t1t = b.q("T1", 273.15 + r.randint(5, 30), "degC", "initial temperature")
    t2, t2t = b.q("T2", 273.15 + r.randint(40, 95), "degC", "final temperature")
    c = b.const("c_water")
    dt = b.step("sub", "dT", "K", b.si[t2] - b.si[t1], x=t2, y=t1)
    q = b.step("heat", "Q", "J", b.si[m] * CONSTANTS["c_water"][0] * (b.si[t2] - b.si[t1]), m=m, c=c, delta_t=dt)
    _, ph = b.ask(q, ("J", "kJ"))
    return r.choice([
        f"How much heat is needed to warm {mt} of water from {t1t} to {t2t}?{b.distract(_pool(b))} Give the "
        f"answer {ph}.",
        f"Water of mass {mt} is heated from {t1t} to {t2t}.{b.distract(_pool(b))} How much heat does it absorb "
        f"{ph}?",
    ])


@template("melt_and_heat", "thermodynamics")
def _t_melt_heat(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(50, 1000) / 1000, "g", "ice mass")
    t0, t0t = b.q("T0", 273.15, "degC", "melting point", exact=True)
    t2, t2t = b.q("T2", 273.15 + r.randint(10, 60), "degC", "final temperature")
    lf = b.const("L_f_water")
    q1 = b.step("heat_latent", "Q_melt", "J", b.si[m] * CONSTANTS["L_f_water"][0], m=m, latent=lf)
    c = b.const("c_water")
    dt = b.step("sub", "dT", "K", b.si[t2] - b.si[t0], x=t2, y=t0)
    q2_si = b.si[m] * CONSTANTS["c_water"][0] * (b.si[t2] - b.si[t0])
    q2 = b.step("heat", "Q_warm", "J", q2_si, m=m, c=c, delta_t=dt)
    q = b.step("add", "Q", "J", b.si[q1] + q2_si, x=q1, y=q2)
    _, ph = b.ask(q, ("kJ", "J"))
    return (f"A {mt} block of ice at {t0t} melts and the water is then warmed to {t2t}.{b.distract(_pool(b))} "
            f"How much heat is needed in total {ph}?")


@template("ideal_gas_pressure", "thermodynamics")
def _t_ideal_gas(b: _Build) -> str:
    r = b.rng
    n, nt = b.q("n", r.randint(1, 50) / 10, "mol", "amount of gas")
    t, tt = b.q("T", 273.15 + r.randint(0, 100), ("degC", "K"), "temperature")
    v, vt = b.q("V", r.randint(5, 100) / 1000, "L", "volume")
    rc = b.const("R")
    p = b.step("ideal_gas_pressure", "p", "Pa", b.si[n] * CONSTANTS["R"][0] * b.si[t] / b.si[v], n=n, R=rc,
               temp=t, vol=v)
    _, ph = b.ask(p, ("kPa", "atm"))
    return (f"A sealed {vt} container holds {nt} of an ideal gas at {tt}.{b.distract(_pool(b))} What is the "
            f"gas pressure {ph}?")


@template("boyle", "thermodynamics")
def _t_boyle(b: _Build) -> str:
    r = b.rng
    p1, p1t = b.q("p1", r.randint(90, 300) * 1000.0, ("kPa", "atm"), "initial pressure", sig=3)
    v1, v1t = b.q("V1", r.randint(1, 20) / 1000, "L", "initial volume")
    p2, p2t = b.q("p2", r.randint(90, 600) * 1000.0, "kPa", "final pressure", sig=3)
    v2 = b.step("boyle_v2", "V2", "m^3", b.si[p1] * b.si[v1] / b.si[p2], p1=p1, v1=v1, p2=p2)
    _, ph = b.ask(v2, "L")
    return (f"A gas occupies {v1t} at {p1t}. It is compressed at constant temperature until its pressure is "
            f"{p2t}.{b.distract(_pool(b))} What is its new volume {ph}?")


@template("charles", "thermodynamics")
def _t_charles(b: _Build) -> str:
    r = b.rng
    v1, v1t = b.q("V1", r.randint(1, 10) / 1000, "L", "initial volume")
    t1, t1t = b.q("T1", 273.15 + r.randint(0, 30), "degC", "initial temperature")
    t2, t2t = b.q("T2", 273.15 + r.randint(50, 200), "degC", "final temperature")
    v2 = b.step("charles_v2", "V2", "m^3", b.si[v1] * b.si[t2] / b.si[t1], v1=v1, t1=t1, t2=t2)
    _, ph = b.ask(v2, "L")
    return (f"A balloon holds {v1t} of air at {t1t}. The air is heated at constant pressure to {t2t}."
            f"{b.distract(_pool(b))} What is the new volume {ph}?")


@template("mixing_water", "thermodynamics")
def _t_mixing(b: _Build) -> str:
    r = b.rng
    m1, m1t = b.q("m1", r.randint(100, 900) / 1000, "g", "hot water mass")
    t1, t1t = b.q("T1", 273.15 + r.randint(60, 95), "degC", "hot water temperature")
    m2, m2t = b.q("m2", r.randint(100, 900) / 1000, "g", "cold water mass")
    t2, t2t = b.q("T2", 273.15 + r.randint(5, 25), "degC", "cold water temperature")
    c = b.const("c_water")
    tf_si = (b.si[m1] * b.si[t1] + b.si[m2] * b.si[t2]) / (b.si[m1] + b.si[m2])
    tf = b.step("mixing_temperature", "T_f", "K", tf_si, m1=m1, c1=c, t1=t1, m2=m2, c2=c, t2=t2)
    _, ph = b.ask(tf, "degC")
    return (f"{m1t} of water at {t1t} is mixed with {m2t} of water at {t2t} in an insulated cup."
            f"{b.distract(_pool(b))} What is the final temperature {ph}?")


@template("carnot_work", "thermodynamics")
def _t_carnot(b: _Build) -> str:
    r = b.rng
    th, tht = b.q("T_hot", 273.15 + r.randint(200, 600), ("degC", "K"), "hot reservoir")
    tc, tct = b.q("T_cold", 273.15 + r.randint(10, 60), ("degC", "K"), "cold reservoir")
    q, qt = b.q("Q_in", r.randint(1, 50) * 1000.0, ("kJ", "J"), "heat input")
    eta_si = 1 - b.si[tc] / b.si[th]
    eta = b.step("carnot_efficiency", "eta", "dimensionless", eta_si, t_cold=tc, t_hot=th)
    w = b.step("useful_output", "W", "J", eta_si * b.si[q], eta=eta, e_in=q)
    _, ph = b.ask(w, ("J", "kJ"))
    return (f"An ideal heat engine works between {tht} and {tct} and takes in {qt} of heat per cycle."
            f"{b.distract(_pool(b))} What is the maximum work it can do per cycle {ph}?")


@template("kettle_time", "thermodynamics")
def _t_kettle(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(500, 2000) / 1000, ("g", "kg"), "water mass")
    t1, t1t = b.q("T1", 273.15 + r.randint(10, 25), "degC", "initial temperature")
    t2, t2t = b.q("T2", 373.15, "degC", "boiling point", exact=True)
    p, pt = b.q("P", r.choice([1000, 1500, 2000, 2200]), ("W", "kW"), "heater power")
    c = b.const("c_water")
    dt = b.step("sub", "dT", "K", b.si[t2] - b.si[t1], x=t2, y=t1)
    q_si = b.si[m] * CONSTANTS["c_water"][0] * (b.si[t2] - b.si[t1])
    q = b.step("heat", "Q", "J", q_si, m=m, c=c, delta_t=dt)
    t = b.step("div", "t", "s", q_si / b.si[p], x=q, y=p)
    _, ph = b.ask(t, ("minute", "s"))
    return (f"A {pt} kettle heats {mt} of water from {t1t} to {t2t}. Assuming no heat losses, how long does it "
            f"take {ph}?{b.distract(_pool(b))}")


@template("kettle_cost", "thermodynamics", assumptions={"efficiency": ["eta"]})
def _t_kettle_cost(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(500, 2000) / 1000, ("g", "kg"), "water mass per boil")
    t1, t1t = b.q("T1", 273.15 + r.randint(10, 25), "degC", "tap water temperature")
    t2, t2t = b.q("T2", 373.15, "degC", "boiling point", exact=True)
    eta, etat = b.q("eta", r.choice([0.8, 0.85, 0.9]), "dimensionless", "kettle efficiency")
    n, nt = b.q("n", r.choice([100, 200, 365]), "dimensionless", "number of boils")
    price, prt = b.q("price", r.choice([0.12, 0.15, 0.2, 0.3]) / 3.6e6, "USD/kWh", "electricity price")
    c = b.const("c_water")
    dt_si = b.si[t2] - b.si[t1]
    q_si = b.si[m] * CONSTANTS["c_water"][0] * dt_si
    dt = b.step("sub", "dT", "K", dt_si, x=t2, y=t1)
    q = b.step("heat", "Q", "J", q_si, m=m, c=c, delta_t=dt)
    e = b.step("div", "E_in", "J", q_si / b.si[eta], x=q, y=eta)
    et = b.step("mul", "E_total", "J", q_si / b.si[eta] * b.si[n], x=e, y=n)
    cost = b.step("mul", "cost", "USD", q_si / b.si[eta] * b.si[n] * b.si[price], x=et, y=price)
    _, ph = b.ask(cost, "USD")
    return (f"A kettle boils {mt} of water starting at {t1t} ({t2t} at boiling), {nt} times a year. Its "
            f"efficiency is {etat}. Electricity costs {prt}.{b.distract(_pool(b))} What does a year of boiling "
            f"cost {ph}?")


# ---------------------------------------------------------------- waves

@template("wave_speed", "waves")
def _t_wave_speed(b: _Build) -> str:
    r = b.rng
    f, ft = b.q("f", r.randint(2, 500), "Hz", "frequency")
    lam, lamt = b.q("lam", r.randint(5, 300) / 100, ("cm", "m"), "wavelength")
    v = b.step("wave_speed", "v", "m/s", b.si[f] * b.si[lam], f=f, lam=lam)
    _, ph = b.ask(v, "m/s")
    return (f"A wave on a rope has a frequency of {ft} and a wavelength of {lamt}.{b.distract(_pool(b))} How "
            f"fast does it travel {ph}?")


@template("sound_wavelength", "waves")
def _t_sound_wavelength(b: _Build) -> str:
    r = b.rng
    f, ft = b.q("f", r.randint(100, 8000), ("Hz", "kHz"), "frequency")
    vs = b.const("v_sound")
    lam = b.step("wavelength", "lam", "m", CONSTANTS["v_sound"][0] / b.si[f], v=vs, f=f)
    _, ph = b.ask(lam, ("cm", "m"))
    return (f"A speaker emits a tone of {ft} in air at room temperature.{b.distract(_pool(b))} What is the "
            f"wavelength of the sound {ph}?")


@template("pendulum", "waves")
def _t_pendulum(b: _Build) -> str:
    r = b.rng
    ln, lnt = b.q("L", r.randint(20, 300) / 100, ("cm", "m"), "pendulum length")
    g = b.const("g")
    t_si = 2 * math.pi * math.sqrt(b.si[ln] / b.si[g])
    t = b.step("pendulum_period", "T", "s", t_si, length=ln, g=g)
    f = b.step("frequency_from_period", "f", "Hz", 1 / t_si, t=t)
    del f
    _, ph = b.ask(t, "s")
    return (f"A simple pendulum has a length of {lnt}.{b.distract(_pool(b))} What is its period of small "
            f"oscillations {ph}?")


@template("pendulum_swings", "waves")
def _t_pendulum_swings(b: _Build) -> str:
    r = b.rng
    ln, lnt = b.q("L", r.randint(20, 300) / 100, ("cm", "m"), "pendulum length")
    tt_si = r.randint(1, 10) * 60.0
    tot, tott = b.q("t", tt_si, "minute", "observation time")
    g = b.const("g")
    t_si = 2 * math.pi * math.sqrt(b.si[ln] / b.si[g])
    t = b.step("pendulum_period", "T", "s", t_si, length=ln, g=g)
    n = b.step("div", "N", "dimensionless", b.si[tot] / t_si, x=tot, y=t)
    _, ph = b.ask(n, "dimensionless")
    return (f"A pendulum {lnt} long swings for {tott}.{b.distract(_pool(b))} How many complete oscillations "
            f"does it make?")


@template("spring_mass_frequency", "waves")
def _t_spring_freq(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(50, 2000) / 1000, ("g", "kg"), "mass")
    k, kt = b.q("k", r.randint(5, 500), "N/m", "spring constant")
    t_si = 2 * math.pi * math.sqrt(b.si[m] / b.si[k])
    t = b.step("spring_period", "T", "s", t_si, m=m, k=k)
    f = b.step("frequency_from_period", "f", "Hz", 1 / t_si, t=t)
    _, ph = b.ask(f, "Hz")
    return (f"A {mt} mass oscillates on a spring of constant {kt}.{b.distract(_pool(b))} What is the "
            f"oscillation frequency {ph}?")


@template("string_harmonic", "waves")
def _t_string(b: _Build) -> str:
    r = b.rng
    n, nt = b.q("n", r.randint(1, 5), "dimensionless", "harmonic number")
    v, vt = b.q("v", r.randint(100, 500), "m/s", "wave speed on the string")
    ln, lnt = b.q("L", r.randint(30, 150) / 100, "cm", "string length")
    f = b.step("string_harmonic_frequency", "f_n", "Hz", b.si[n] * b.si[v] / (2 * b.si[ln]), n=n, v=v, length=ln)
    _, ph = b.ask(f, ("Hz", "kHz"))
    return (f"Waves travel at {vt} on a guitar string {lnt} long, fixed at both ends.{b.distract(_pool(b))} What "
            f"is the frequency of harmonic number {nt} {ph}?")


@template("photon_energy", "waves")
def _t_photon(b: _Build) -> str:
    r = b.rng
    lam, lamt = b.q("lam", r.randint(300, 800) * 1e-9, "nm", "wavelength")
    h = b.const("h")
    c = b.const("c")
    e = b.step("photon_energy_wavelength", "E", "J", CONSTANTS["h"][0] * CONSTANTS["c"][0] / b.si[lam], h=h, c=c,
               lam=lam)
    _, ph = b.ask(e, "eV")
    return (f"What is the energy of a photon of wavelength {lamt}, {ph}?{b.distract(_pool(b))}")


# ---------------------------------------------------------------- optics

@template("thin_lens", "optics")
def _t_thin_lens(b: _Build) -> str:
    r = b.rng
    f, ft = b.q("f", r.randint(5, 30) / 100, "cm", "focal length")
    do, dot = b.q("d_o", b.si[f] * _u(r.random(), 1.3, 4), "cm", "object distance")
    di = b.step("thin_lens_image_distance", "d_i", "m", 1 / (1 / b.si[f] - 1 / b.si[do]), focal=f, d_o=do)
    _, ph = b.ask(di, "cm")
    return (f"An object is placed {dot} in front of a converging lens of focal length {ft}.{b.distract(_pool(b))} "
            f"Where is the image formed, {ph} from the lens?")


@template("lens_image_height", "optics")
def _t_image_height(b: _Build) -> str:
    r = b.rng
    f, ft = b.q("f", r.randint(5, 30) / 100, "cm", "focal length")
    do, dot = b.q("d_o", b.si[f] * _u(r.random(), 1.3, 4), "cm", "object distance")
    ho, hot = b.q("h_o", r.randint(1, 20) / 100, ("cm", "mm"), "object height")
    di_si = 1 / (1 / b.si[f] - 1 / b.si[do])
    di = b.step("thin_lens_image_distance", "d_i", "m", di_si, focal=f, d_o=do)
    mg = b.step("magnification", "M", "dimensionless", -di_si / b.si[do], d_i=di, d_o=do)
    hi = b.step("mul", "h_i", "m", -di_si / b.si[do] * b.si[ho], x=mg, y=ho)
    hia = b.step("abs", "h_img", "m", abs(di_si / b.si[do] * b.si[ho]), x=hi)
    _, ph = b.ask(hia, ("cm", "mm"))
    return (f"A {hot} tall candle stands {dot} from a converging lens with focal length {ft}."
            f"{b.distract(_pool(b))} How tall is its image {ph}?")


@template("snell", "optics")
def _t_snell(b: _Build) -> str:
    r = b.rng
    n1, n1t = b.q("n1", 1.0, "dimensionless", "index of air", exact=True)
    th, tht = b.q("theta1", math.radians(r.randint(10, 70)), "degree", "angle of incidence")
    n2, n2t = b.q("n2", r.choice([1.33, 1.5, 1.52, 2.42]), "dimensionless", "refractive index")
    th2 = b.step("snell_angle", "theta2", "rad", math.asin(math.sin(b.si[th]) / b.si[n2]), n1=n1, theta1=th, n2=n2)
    _, ph = b.ask(th2, "degree")
    return (f"Light in air (n = {n1t}) strikes a glass surface with refractive index {n2t} at {tht} from the "
            f"normal.{b.distract(_pool(b))} What is the angle of refraction {ph}?")


@template("critical_angle", "optics")
def _t_critical(b: _Build) -> str:
    r = b.rng
    n1, n1t = b.q("n1", r.choice([1.33, 1.5, 1.52, 1.65, 2.42]), "dimensionless", "refractive index of the medium")
    n2, n2t = b.q("n2", 1.0, "dimensionless", "index of air", exact=True)
    th = b.step("critical_angle", "theta_c", "rad", math.asin(b.si[n2] / b.si[n1]), n1=n1, n2=n2)
    _, ph = b.ask(th, "degree")
    return (f"What is the critical angle for light going from a material with refractive index {n1t} into air "
            f"(n = {n2t}), {ph}?{b.distract(_pool(b))}")


@template("light_in_glass", "optics")
def _t_light_glass(b: _Build) -> str:
    r = b.rng
    n, nt = b.q("n", r.choice([1.33, 1.46, 1.5, 1.52, 1.6]), "dimensionless", "refractive index")
    d, dt = b.q("d", r.randint(1, 50) / 100, "cm", "thickness")
    c = b.const("c")
    v_si = CONSTANTS["c"][0] / b.si[n]
    v = b.step("speed_in_medium", "v", "m/s", v_si, c=c, n=n)
    t = b.step("time_from_distance", "t", "s", b.si[d] / v_si, d=d, v=v)
    _, ph = b.ask(t, ("ns", "ps"))
    return (f"Light crosses a glass block {dt} thick with refractive index {nt}.{b.distract(_pool(b))} How long "
            f"does the crossing take {ph}?")


@template("lens_power", "optics")
def _t_lens_power(b: _Build) -> str:
    r = b.rng
    f, ft = b.q("f", r.randint(10, 200) / 100, "cm", "focal length")
    p = b.step("lens_power", "P", "1/m", 1 / b.si[f], focal=f)
    _, ph = b.ask(p, "1/m")
    return (f"A reading lens has a focal length of {ft}.{b.distract(_pool(b))} What is its optical power "
            f"{ph} (diopters)?")


@template("two_lens_distance", "optics")
def _t_lens_chain(b: _Build) -> str:
    r = b.rng
    f1, f1t = b.q("f1", r.randint(5, 15) / 100, "cm", "focal length of lens 1")
    do, dot = b.q("d_o", b.si[f1] * _u(r.random(), 1.5, 3), "cm", "object distance")
    sep, sept = b.q("s", r.randint(60, 120) / 100, "cm", "lens separation")
    f2, f2t = b.q("f2", r.randint(5, 15) / 100, "cm", "focal length of lens 2")
    di1_si = 1 / (1 / b.si[f1] - 1 / b.si[do])
    do2_si = b.si[sep] - di1_si
    if do2_si <= b.si[f2] * 1.05:
        # keep the second object outside the focal length: move the lenses apart
        b.givens[-2]["value"] = round((di1_si + 2.5 * b.si[f2]) * 100, 1)
        b.si[sep] = b.givens[-2]["value"] / 100
        sept = f"{_fmt(b.givens[-2]['value'])} cm"
        do2_si = b.si[sep] - di1_si
    di2_si = 1 / (1 / b.si[f2] - 1 / do2_si)
    di1 = b.step("thin_lens_image_distance", "d_i1", "m", di1_si, focal=f1, d_o=do)
    do2 = b.step("sub", "d_o2", "m", do2_si, x=sep, y=di1)
    di2 = b.step("thin_lens_image_distance", "d_i2", "m", di2_si, focal=f2, d_o=do2)
    _, ph = b.ask(di2, "cm")
    return (f"An object sits {dot} in front of a lens of focal length {f1t}. A second lens of focal length {f2t} "
            f"is {sept} behind the first.{b.distract(_pool(b))} Where is the final image, {ph} behind the second "
            f"lens?")


# ---------------------------------------------------------------- conditions (the 'assumption' mix)
# Each problem states a condition (air resistance, heat loss, efficiency, friction) carried by a given that the
# solution must use; leaving it out still gives a dimensionally valid, plausible, wrong answer. Chains of 3 or 4
# steps, short enough for the CPU search to reach, and no distractor: the one given a trace may leave unused is the
# condition.

@template("drag_fall_speed", "energy", assumptions={"air resistance": ["W_drag"]}, core=False)
def _t_drag_fall(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(2, 40) / 10, ("kg", "g"), "mass")
    h, ht = b.q("h", r.randint(10, 60), "m", "drop height")
    g = b.const("g")
    pe_si = b.si[m] * b.si[g] * b.si[h]
    wd, wdt = b.q("W_drag", pe_si * r.choice([0.15, 0.2, 0.25, 0.3, 0.4]), "J", "energy lost to air resistance")
    ke_si = pe_si - b.si[wd]
    pe = b.step("potential_energy", "PE", "J", pe_si, m=m, g=g, h=h)
    ke = b.step("sub", "KE", "J", ke_si, x=pe, y=wd)
    v = b.step("speed_from_kinetic_energy", "v", "m/s", math.sqrt(2 * ke_si / b.si[m]), ke=ke, m=m)
    _, ph = b.ask(v, ("m/s", "km/h"))
    return (f"A {mt} ball is dropped from rest from a height of {ht}. Air resistance takes {wdt} of its mechanical "
            f"energy during the fall. How fast is it moving just before it lands, {ph}?")


@template("heater_heat_loss", "thermodynamics", assumptions={"heat loss": ["P_loss"]}, core=False)
def _t_heater_loss(b: _Build) -> str:
    r = b.rng
    p, pt = b.q("P", r.choice([1000, 1500, 2000, 2500, 3000]), ("W", "kW"), "heater power")
    m, mt = b.q("m", r.randint(5, 30) / 10, ("kg", "g"), "water mass")
    dt, dtt = b.q("dT", r.randint(10, 60), "K", "temperature rise")
    pl, plt = b.q("P_loss", b.si[p] * r.choice([0.15, 0.2, 0.25, 0.3]), "W", "heat lost to the room")
    c = b.const("c_water")
    q_si = b.si[m] * CONSTANTS["c_water"][0] * b.si[dt]
    q = b.step("heat", "Q", "J", q_si, m=m, c=c, delta_t=dt)
    pn = b.step("sub", "P_net", "W", b.si[p] - b.si[pl], x=p, y=pl)
    t = b.step("div", "t", "s", q_si / (b.si[p] - b.si[pl]), x=q, y=pn)
    _, ph = b.ask(t, ("minute", "s"))
    return (f"A {pt} immersion heater warms {mt} of water by {dtt}. While it heats, the water loses heat to the "
            f"room at a steady {plt}. How long does the warming take {ph}?")


@template("winch_efficiency_time", "energy", assumptions={"efficiency": ["eta"]}, core=False)
def _t_winch_time(b: _Build) -> str:
    r = b.rng
    eta, etat = b.q("eta", r.choice([0.6, 0.65, 0.7, 0.75, 0.8, 0.85]), "dimensionless", "winch efficiency")
    p, pt = b.q("P_in", r.choice([500, 800, 1200, 1500, 2000, 3000]), ("W", "kW"), "electrical input power")
    m, mt = b.q("m", r.randint(50, 600), "kg", "load mass")
    h, ht = b.q("h", r.randint(3, 30), "m", "height")
    g = b.const("g")
    e_si = b.si[m] * b.si[g] * b.si[h]
    e = b.step("potential_energy", "E", "J", e_si, m=m, g=g, h=h)
    po = b.step("useful_output", "P_out", "W", b.si[eta] * b.si[p], eta=eta, e_in=p)
    t = b.step("div", "t", "s", e_si / (b.si[eta] * b.si[p]), x=e, y=po)
    _, ph = b.ask(t, ("s", "minute"))
    return (f"An electric winch draws {pt} from the mains and has an efficiency of {etat}. "
            f"How long does it take to raise a {mt} load by {ht} at constant speed, {ph}?")


@template("friction_pull_distance", "dynamics", assumptions={"friction": ["f_fr"]}, core=False)
def _t_friction_pull(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(5, 60), "kg", "mass")
    f, ft = b.q("F_app", r.randint(20, 200), "N", "pulling force")
    fr, frt = b.q("f_fr", b.si[f] * r.choice([0.2, 0.3, 0.4, 0.5, 0.6]), "N", "kinetic friction force")
    t, tt = b.q("t", r.randint(2, 10), "s", "time")
    v0 = b.q("v0", 0.0, "m/s", "starts from rest", exact=True)[0]
    a_si = (b.si[f] - b.si[fr]) / b.si[m]
    fn = b.step("sub", "F_net", "N", b.si[f] - b.si[fr], x=f, y=fr)
    a = b.step("newton_accel", "a", "m/s^2", a_si, f=fn, m=m)
    d = b.step("kin_displacement", "d", "m", 0.5 * a_si * b.si[t] ** 2, v0=v0, a=a, t=t)
    _, ph = b.ask(d, ("m", "cm") if a_si * b.si[t] ** 2 < 2 else "m")
    return (f"A {mt} sled starts from rest and is pulled across level snow by a horizontal force of {ft}. Kinetic "
            f"friction opposes the motion with a force of {frt}. How far does the sled "
            f"travel in {tt}, {ph}?")


@template("pump_efficiency_power", "energy", assumptions={"efficiency": ["eta"]}, core=False)
def _t_pump_power(b: _Build) -> str:
    r = b.rng
    m, mt = b.q("m", r.randint(2, 40) * 50, "kg", "water mass")
    h, ht = b.q("h", r.randint(4, 40), "m", "lift height")
    t, tt = b.q("t", 60 * r.randint(2, 20), ("minute", "s"), "pumping time")
    eta, etat = b.q("eta", r.choice([0.55, 0.6, 0.65, 0.7, 0.75, 0.8]), "dimensionless", "pump efficiency")
    g = b.const("g")
    e_si = b.si[m] * b.si[g] * b.si[h]
    e = b.step("potential_energy", "E", "J", e_si, m=m, g=g, h=h)
    po = b.step("power", "P_out", "W", e_si / b.si[t], w=e, t=t)
    pi = b.step("div", "P_in", "W", e_si / b.si[t] / b.si[eta], x=po, y=eta)
    _, ph = b.ask(pi, ("W", "kW"))
    return (f"A pump with an efficiency of {etat} lifts {mt} of water {ht} up into a tank in {tt}."
            f" What electrical power does the pump draw {ph}?")


@template("heater_efficiency_warming", "thermodynamics", assumptions={"efficiency": ["eta"]}, core=False)
def _t_heater_eff(b: _Build) -> str:
    r = b.rng
    p, pt = b.q("P", r.choice([500, 800, 1000, 1200, 1500, 2000]), ("W", "kW"), "heater power")
    t, tt = b.q("t", 60 * r.randint(2, 10), ("minute", "s"), "heating time")
    m, mt = b.q("m", r.randint(10, 50) / 10, "kg", "water mass")
    eta, etat = b.q("eta", r.choice([0.6, 0.7, 0.75, 0.8, 0.85, 0.9]), "dimensionless", "heater efficiency")
    e_si = b.si[p] * b.si[t]
    e = b.step("energy_from_power", "E", "J", e_si, p=p, t=t)
    q = b.step("useful_output", "Q", "J", b.si[eta] * e_si, eta=eta, e_in=e)
    c = b.const("c_water")
    dt = b.step("temperature_change", "dT", "K", b.si[eta] * e_si / (b.si[m] * CONSTANTS["c_water"][0]), q=q, m=m,
                c=c)
    _, ph = b.ask(dt, "K")
    return (f"A {pt} heater with an efficiency of {etat} runs for {tt} in a tank holding {mt} of water."
            f" By how much does the water temperature rise, {ph}?")


# ---------------------------------------------------------------- generation


def template_names() -> list[str]:
    return [t.name for t in TEMPLATES]


def template_split(name: str) -> str:
    """'heldout' or 'train': the split of the template `name` (HELDOUT_TOPICS, HELDOUT_TEMPLATES)."""
    by_name = {t.name: t for t in TEMPLATES}
    if name not in by_name:
        raise ValueError(f"unknown physics template {name!r}; one of {', '.join(by_name)}")
    return "heldout" if name in HELDOUT_TEMPLATES or by_name[name].topic in HELDOUT_TOPICS else "train"


def split_templates(split: str = "all") -> list[Template]:
    """The templates of a split (see SPLITS), in registration order."""
    if split not in SPLITS:
        raise ValueError(f"unknown physics split {split!r}; one of {', '.join(SPLITS)} (train: for training, "
                         "heldout: for evaluation)")
    return [t for t in TEMPLATES if split == "all" or template_split(t.name) == split]


def _answer_value(b: _Build) -> float:
    return unit_info(b.ask_unit).from_base(b.si[b.answer_name])


def make_problem(tpl: Template | str, seed: int, index: int = 0) -> Problem:
    """One problem from one template; the same (template, seed, index) always gives the same problem."""
    if isinstance(tpl, str):
        by_name = {t.name: t for t in TEMPLATES}
        if tpl not in by_name:
            raise ValueError(f"unknown physics template {tpl!r}")
        tpl = by_name[tpl]
    rng = random.Random(f"{seed}:{index}:{tpl.name}")
    b = _Build(rng, tpl.topic)
    text = tpl.make(b)
    text = " ".join(text.split())
    value = _answer_value(b)
    trace = b.trace()
    trace["meta"] = {"template": tpl.name, "template_split": template_split(tpl.name)}
    if tpl.assumptions:
        names = {g["name"] for g in trace["givens"]}
        missing = sorted(g for gs in tpl.assumptions.values() for g in gs if g not in names)
        if missing:
            raise RuntimeError(f"physics template {tpl.name}: assumption given(s) {missing} are not among its givens")
        trace["meta"]["assumptions"] = {k: list(v) for k, v in tpl.assumptions.items()}
    return Problem(
        id=f"physics/{seed}/{index}/{tpl.name}", source="physics", text=text, answer=f"{value:.6g}",
        answer_value=float(value), answer_unit=b.ask_unit, level=None, subject=tpl.topic, gold_trace=trace,
        gold_steps=len(trace["steps"]),
    )


def mix_templates(mix: str = "core") -> list[Template]:
    """The templates of a mix (see MIXES), in registration order."""
    if mix not in MIXES:
        raise ValueError(f"unknown physics mix {mix!r}; one of {', '.join(MIXES)}")
    if mix == "core":
        return [t for t in TEMPLATES if t.core]
    if mix == "assumption":
        return [t for t in TEMPLATES if t.assumptions]
    return list(TEMPLATES)


def generate_problems(n: int = 400, seed: int = 0, templates: list[str] | None = None, mix: str = "core",
                      split: str = "all") -> list[Problem]:
    """`n` problems, cycling through the templates of `mix` and `split` (all, or the named ones) in a seeded
    shuffled order.

    mix 'core' (the default) draws the original templates, so a seed gives the same problems whatever templates
    are added outside it; 'assumption' draws the templates that state a condition (meta.assumptions of the gold
    trace); 'all' draws every template. split 'train' draws the templates training may see, 'heldout' the ones
    only evaluations see, 'all' (the default for a direct call) both: every config states its split (see
    HELDOUT_TEMPLATES). Each gold trace's meta records its template and template_split.
    """
    in_split = {t.name for t in split_templates(split)}
    pool = [t for t in mix_templates(mix) if t.name in in_split and (templates is None or t.name in templates)]
    if not pool:
        raise ValueError(f"no physics templates of mix {mix!r} and split {split!r} match {templates!r}"
                         + (" (templates outside the core set need mix='all' or 'assumption')" if mix == "core"
                            else ""))
    order = random.Random(seed).sample(pool, len(pool))
    return [make_problem(order[i % len(order)], seed, i) for i in range(n)]


@data_source("physics")
def iter_physics(data_dir: str | Path | None = None, **kw: Any) -> Iterator[Problem]:
    """The generated problems as a data source (generate_problems' keyword arguments, split included: heldout to
    evaluate, train to train; no data folder needed)."""
    return iter(generate_problems(**kw))
