"""Energy primitives: kinetic and potential energy, work, power, efficiency and energy conservation."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pcr_ray.core.primitives.numeric import div, positive, reg, require, sqrt, values_free
from pcr_ray.core.primitives.registry import DomainError, OutRule, Param
from pcr_ray.core.units import DIMENSIONLESS, Dims, dims_of_unit

F = "energy"
M, V, A, L, J, ANG = "kg", "m/s", "m/s^2", "m", "J", "dimensionless"

reg("kinetic_energy", F, [Param("m", M), Param("v", V)], J, lambda m, v: 0.5 * m * v * v, "KE = m v^2 / 2",
    "Kinetic energy of mass m at speed v.")
reg("potential_energy", F, [Param("m", M), Param("g", A), Param("h", L)], J, lambda m, g, h: m * g * h,
    "PE = m g h", "Gravitational potential energy of mass m at height h.")
reg("spring_energy", F, [Param("k", "N/m"), Param("x", L)], J, lambda k, x: 0.5 * k * x * x, "E = k x^2 / 2",
    "Elastic energy stored in a spring of constant k stretched by x.")
reg("work", F, [Param("f", "N"), Param("d", L)], J, lambda f, d: f * d, "W = F d",
    "Work of a constant force along the displacement d.")
reg("work_angle", F, [Param("f", "N"), Param("d", L), Param("theta", ANG)], J,
    lambda f, d, theta: f * d * math.cos(theta), "W = F d cos(theta)",
    "Work of a force at angle theta to the displacement.")
reg("power", F, [Param("w", J), Param("t", "s")], "W", lambda w, t: div(w, t, "power: zero time"),
    "P = W / t", "Average power: energy (work) per unit time.")
reg("power_force_velocity", F, [Param("f", "N"), Param("v", V)], "W", lambda f, v: f * v, "P = F v",
    "Power delivered by a force F moving at speed v.")
_ENERGY_OR_POWER = (dims_of_unit(J), dims_of_unit("W"))


def _energy_or_power(op: str, arg: str, out: Dims | None) -> OutRule:
    """Output rule: `arg` must be an energy or a power (an efficiency is not a ratio of anything else)."""

    def rule(dims: Mapping[str, Dims], _v: Mapping[str, Any]) -> Dims:
        require(dims[arg] in _ENERGY_OR_POWER, f"{op}: '{arg}' must be an energy or a power (J or W)")
        return out if out is not None else dims[arg]

    return values_free(rule)


def _efficiency(e_out: float, e_in: float) -> float:
    eta = div(e_out, positive(e_in, "input energy or power"), "efficiency: zero input")
    if eta < 0 or eta > 1:
        raise DomainError(f"efficiency: {eta:.4g} is outside [0, 1]: the useful output cannot exceed the input "
                          "(are e_out and e_in swapped?)")
    return eta


def _useful_output(eta: float, e_in: float) -> float:
    if eta < 0 or eta > 1:
        raise DomainError(f"useful_output: an efficiency must be a fraction in [0, 1] (got {eta:.4g})")
    return eta * e_in


reg("efficiency", F, [Param("e_out"), Param("e_in", "=e_out")], _energy_or_power("efficiency", "e_out", DIMENSIONLESS),
    _efficiency, "eta = E_out / E_in",
    "Efficiency as a fraction in [0, 1]: useful output over input (both energies or both powers).")
reg("useful_output", F, [Param("eta", "dimensionless"), Param("e_in")],
    _energy_or_power("useful_output", "e_in", None), _useful_output,
    "E_out = eta E_in", "Useful output (energy or power) from an input and an efficiency fraction in [0, 1].")
reg("speed_from_kinetic_energy", F, [Param("ke", J), Param("m", M)], V,
    lambda ke, m: sqrt(div(2 * ke, positive(m, "mass")), "kinetic energy must not be negative"),
    "v = sqrt(2 KE / m)", "Speed of mass m with kinetic energy KE.")
reg("mass_from_kinetic_energy", F, [Param("ke", J), Param("v", V)], M,
    lambda ke, v: div(2 * ke, v * v, "mass_from_kinetic_energy: zero speed"), "m = 2 KE / v^2",
    "Mass from kinetic energy and speed.")
reg("height_from_potential_energy", F, [Param("pe", J), Param("m", M), Param("g", A)], L,
    lambda pe, m, g: div(pe, m * g, "height_from_potential_energy: m g = 0"), "h = PE / (m g)",
    "Height at which mass m has potential energy PE.")
reg("energy_conservation_speed", F, [Param("g", A), Param("h", L)], V,
    lambda g, h: sqrt(2 * g * h, "energy_conservation_speed: g h must be non-negative"), "v = sqrt(2 g h)",
    "Speed gained falling (or sliding frictionlessly) through a height h.")
reg("work_energy_final_speed", F, [Param("m", M), Param("v0", V), Param("w", J)], V,
    lambda m, v0, w: sqrt(v0 * v0 + div(2 * w, positive(m, "mass")),
    "work removes more than the kinetic energy"), "v = sqrt(v0^2 + 2 W / m)",
    "Speed after net work W is done on mass m moving at v0 (work-energy theorem).")
reg("rotational_kinetic_energy", F, [Param("inertia", "kg*m^2"), Param("omega", "1/s")], J,
    lambda inertia, omega: 0.5 * inertia * omega * omega, "KE = I omega^2 / 2",
    "Kinetic energy of a body with moment of inertia I spinning at omega.")
reg("gravitational_potential_energy", F,
    [Param("G", "N*m^2/kg^2"), Param("m1", M), Param("m2", M), Param("r", L)], J,
    lambda G, m1, m2, r: -div(G * m1 * m2, r, "zero distance"), "U = -G m1 m2 / r",
    "Newtonian gravitational potential energy of two masses at distance r.")
reg("escape_velocity", F, [Param("G", "N*m^2/kg^2"), Param("m", M), Param("r", L)], V,
    lambda G, m, r: sqrt(div(2 * G * m, positive(r, "radius"))), "v = sqrt(2 G M / r)",
    "Escape speed from distance r of a body of mass M.")
reg("spring_compression_from_energy", F, [Param("e", J), Param("k", "N/m")], L,
    lambda e, k: sqrt(div(2 * e, positive(k, "spring constant"))), "x = sqrt(2 E / k)",
    "Compression of a spring of constant k that stores energy E.")


def _fall_speed(G: float, m: float, v_i: float, r_i: float, r_f: float) -> float:
    """sqrt(v_i^2 + 2 G M (1/r_f - 1/r_i)): energy conservation in the 1/r potential of a mass M."""
    gain = 2 * G * m * (div(1.0, positive(r_f, "final distance")) - div(1.0, positive(r_i, "initial distance")))
    return sqrt(v_i * v_i + gain, "gravity_fall_speed: the body turns back before it reaches r_f "
                                  "(v_i^2 + 2 G M (1/r_f - 1/r_i) is negative)")


reg("orbital_energy", F, [Param("G", "N*m^2/kg^2"), Param("m1", M), Param("m2", M), Param("r", L)], J,
    lambda G, m1, m2, r: -div(G * m1 * m2, 2 * positive(r, "orbit radius")), "E = -G M m / (2 r)",
    "Mechanical energy (kinetic plus potential) of a body in a circular orbit of radius r (r = the semi-major "
    "axis for an ellipse).")
reg("gravity_fall_speed", F,
    [Param("G", "N*m^2/kg^2"), Param("m", M), Param("v_i", V), Param("r_i", L), Param("r_f", L)], V, _fall_speed,
    "v_f = sqrt(v_i^2 + 2 G M (1/r_f - 1/r_i))",
    "Speed at distance r_f from a mass M of a body moving at v_i at distance r_i, from energy conservation in "
    "the 1/r potential (falling in: r_f < r_i).")
