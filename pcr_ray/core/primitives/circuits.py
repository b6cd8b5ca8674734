"""Electric circuit and electrostatics primitives: Ohm's law, power, R and C networks, Coulomb."""

from __future__ import annotations

import math

from pcr_ray.core.primitives.numeric import div, reg
from pcr_ray.core.primitives.registry import DomainError, Param

F = "circuits"
AMP, V, R, C, Q, S, W = "A", "V", "ohm", "F", "C", "s", "W"
KE = "N*m^2/C^2"


def _reciprocal_sum(**kw: float) -> float:
    vals = list(kw.values())
    if any(v == 0 for v in vals):
        raise DomainError("a zero element in a reciprocal sum")
    total = math.fsum(1.0 / v for v in vals)
    return div(1.0, total, "reciprocal sum is zero")


reg("ohm_voltage", F, [Param("i", AMP), Param("r", R)], V, lambda i, r: i * r, "V = I R",
    "Voltage across a resistance R carrying current I (Ohm's law).")
reg("ohm_current", F, [Param("v", V), Param("r", R)], AMP,
    lambda v, r: div(v, r, "ohm_current: zero resistance"), "I = V / R",
    "Current through resistance R under voltage V.")
reg("ohm_resistance", F, [Param("v", V), Param("i", AMP)], R,
    lambda v, i: div(v, i, "ohm_resistance: zero current"), "R = V / I",
    "Resistance from voltage and current.")
reg("series_resistance", F, [Param("x1", R), Param("x2", R)], R, lambda **kw: math.fsum(kw.values()),
    "R1 + R2 + ... + Rn", "Equivalent resistance of 2 to 8 resistors in series.", variadic=True,
    commutative=True)
reg("parallel_resistance", F, [Param("x1", R), Param("x2", R)], R, _reciprocal_sum,
    "1 / (1/R1 + 1/R2 + ... + 1/Rn)", "Equivalent resistance of 2 to 8 resistors in parallel.", variadic=True,
    commutative=True)
reg("series_capacitance", F, [Param("x1", C), Param("x2", C)], C, _reciprocal_sum,
    "1 / (1/C1 + 1/C2 + ... + 1/Cn)", "Equivalent capacitance of 2 to 8 capacitors in series.", variadic=True,
    commutative=True)
reg("parallel_capacitance", F, [Param("x1", C), Param("x2", C)], C, lambda **kw: math.fsum(kw.values()),
    "C1 + C2 + ... + Cn", "Equivalent capacitance of 2 to 8 capacitors in parallel.", variadic=True,
    commutative=True)
reg("electric_power", F, [Param("v", V), Param("i", AMP)], W, lambda v, i: v * i, "P = V I",
    "Electric power from voltage and current.")
reg("power_i2r", F, [Param("i", AMP), Param("r", R)], W, lambda i, r: i * i * r, "P = I^2 R",
    "Power dissipated in a resistance R by current I.")
reg("power_v2r", F, [Param("v", V), Param("r", R)], W,
    lambda v, r: div(v * v, r, "power_v2r: zero resistance"), "P = V^2 / R",
    "Power dissipated in a resistance R under voltage V.")
reg("current_from_power", F, [Param("p", W), Param("v", V)], AMP,
    lambda p, v: div(p, v, "current_from_power: zero voltage"), "I = P / V",
    "Current drawn by a device of power P at voltage V.")
reg("energy_from_power", F, [Param("p", W), Param("t", S)], "J", lambda p, t: p * t, "E = P t",
    "Energy used (or delivered) at power P over time t (kWh declared as out unit works).")
reg("charge_from_current", F, [Param("i", AMP), Param("t", S)], Q, lambda i, t: i * t, "Q = I t",
    "Charge moved by a steady current I in time t.")
reg("current_from_charge", F, [Param("q", Q), Param("t", S)], AMP,
    lambda q, t: div(q, t, "current_from_charge: zero time"), "I = Q / t",
    "Average current from charge and time.")
reg("capacitor_charge", F, [Param("c", C), Param("v", V)], Q, lambda c, v: c * v, "Q = C V",
    "Charge on a capacitor C at voltage V.")
reg("capacitance_from_charge", F, [Param("q", Q), Param("v", V)], C,
    lambda q, v: div(q, v, "capacitance_from_charge: zero voltage"), "C = Q / V",
    "Capacitance from stored charge and voltage.")
reg("capacitor_energy", F, [Param("c", C), Param("v", V)], "J", lambda c, v: 0.5 * c * v * v, "E = C V^2 / 2",
    "Energy stored in a capacitor C at voltage V.")
reg("rc_time_constant", F, [Param("r", R), Param("c", C)], S, lambda r, c: r * c, "tau = R C",
    "Time constant of an RC circuit.")
reg("capacitor_discharge_voltage", F, [Param("v0", V), Param("t", S), Param("tau", S)], V,
    lambda v0, t, tau: v0 * math.exp(-div(t, tau, "zero time constant")), "V = V0 e^(-t / tau)",
    "Voltage of a discharging capacitor after time t.")
reg("capacitor_charging_voltage", F, [Param("v0", V), Param("t", S), Param("tau", S)], V,
    lambda v0, t, tau: v0 * (1 - math.exp(-div(t, tau, "zero time constant"))), "V = V0 (1 - e^(-t / tau))",
    "Voltage of a capacitor charging toward supply V0 after time t.")
reg("voltage_divider", F, [Param("vin", V), Param("r1", R), Param("r2", R)], V,
    lambda vin, r1, r2: div(vin * r2, r1 + r2, "voltage_divider: zero total resistance"),
    "Vout = Vin R2 / (R1 + R2)", "Output voltage across R2 of a two-resistor divider.")
reg("resistance_from_resistivity", F, [Param("rho", "ohm*m"), Param("length", "m"), Param("area", "m^2")], R,
    lambda rho, length, area: div(rho * length, area, "zero cross-section"), "R = rho L / A",
    "Resistance of a wire of resistivity rho, length L and cross-section A.")
reg("coulomb_force", F, [Param("k_e", KE), Param("q1", Q), Param("q2", Q), Param("r", "m")], "N",
    lambda k_e, q1, q2, r: div(k_e * q1 * q2, r * r, "coulomb_force: zero distance"), "F = k_e q1 q2 / r^2",
    "Coulomb force between two point charges (positive = repulsive).")
reg("electric_field_point", F, [Param("k_e", KE), Param("q", Q), Param("r", "m")], "N/C",
    lambda k_e, q, r: div(k_e * q, r * r, "electric_field_point: zero distance"), "E = k_e q / r^2",
    "Electric field of a point charge q at distance r.")
reg("electric_field_from_force", F, [Param("f", "N"), Param("q", Q)], "N/C",
    lambda f, q: div(f, q, "zero charge"), "E = F / q", "Electric field from the force on a test charge q.")
reg("electric_potential_point", F, [Param("k_e", KE), Param("q", Q), Param("r", "m")], V,
    lambda k_e, q, r: div(k_e * q, r, "electric_potential_point: zero distance"), "V = k_e q / r",
    "Electric potential of a point charge q at distance r.")
reg("charge_energy_voltage", F, [Param("q", Q), Param("v", V)], "J", lambda q, v: q * v, "E = q V",
    "Energy gained by charge q moving through potential difference V.")
