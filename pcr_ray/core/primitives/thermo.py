"""Thermodynamics primitives: heat, latent heat, ideal gas law, gas laws, heat engines and heat transfer.

Temperatures are kelvin in base units (a given in degC is converted with its offset); parameters named
`delta_t` are temperature differences with the dimension K.
"""

from __future__ import annotations

from pcr_ray.core.primitives.numeric import div, positive, reg
from pcr_ray.core.primitives.registry import Param

F = "thermodynamics"
M, C, K, J, PA, M3, MOL = "kg", "J/(kg*K)", "K", "J", "Pa", "m^3", "mol"
RG = "J/(mol*K)"


def _mix_temperature(m1: float, c1: float, t1: float, m2: float, c2: float, t2: float) -> float:
    return div(m1 * c1 * t1 + m2 * c2 * t2, m1 * c1 + m2 * c2, "mixing with zero total heat capacity")


reg("heat", F, [Param("m", M), Param("c", C), Param("delta_t", K)], J, lambda m, c, delta_t: m * c * delta_t,
    "Q = m c dT", "Heat to change the temperature of mass m with specific heat c by dT.")
reg("heat_latent", F, [Param("m", M), Param("latent", "J/kg")], J, lambda m, latent: m * latent, "Q = m L",
    "Heat for a phase change of mass m with latent heat L.")
reg("temperature_change", F, [Param("q", J), Param("m", M), Param("c", C)], K,
    lambda q, m, c: div(q, m * c, "temperature_change: zero heat capacity"), "dT = Q / (m c)",
    "Temperature change of mass m (specific heat c) receiving heat Q.")
reg("specific_heat_from_heat", F, [Param("q", J), Param("m", M), Param("delta_t", K)], C,
    lambda q, m, delta_t: div(q, m * delta_t, "zero mass or temperature change"), "c = Q / (m dT)",
    "Specific heat from heat, mass and temperature change.")
reg("mass_from_heat", F, [Param("q", J), Param("c", C), Param("delta_t", K)], M,
    lambda q, c, delta_t: div(q, c * delta_t, "zero specific heat or temperature change"), "m = Q / (c dT)",
    "Mass heated by Q through dT given specific heat c.")
reg("mixing_temperature", F,
    [Param("m1", M), Param("c1", C), Param("t1", K), Param("m2", M), Param("c2", C), Param("t2", K)], K,
    _mix_temperature, "(m1 c1 T1 + m2 c2 T2) / (m1 c1 + m2 c2)",
    "Final temperature when two bodies exchange heat (no losses).")
reg("ideal_gas_pressure", F, [Param("n", MOL), Param("R", RG), Param("temp", K), Param("vol", M3)], PA,
    lambda n, R, temp, vol: div(n * R * temp, vol, "ideal_gas_pressure: zero volume"), "P = n R T / V",
    "Pressure of n moles of ideal gas at temperature T in volume V.")
reg("ideal_gas_volume", F, [Param("n", MOL), Param("R", RG), Param("temp", K), Param("p", PA)], M3,
    lambda n, R, temp, p: div(n * R * temp, p, "ideal_gas_volume: zero pressure"), "V = n R T / P",
    "Volume of n moles of ideal gas at temperature T and pressure P.")
reg("ideal_gas_temperature", F, [Param("p", PA), Param("vol", M3), Param("n", MOL), Param("R", RG)], K,
    lambda p, vol, n, R: div(p * vol, n * R, "ideal_gas_temperature: zero moles"), "T = P V / (n R)",
    "Temperature of n moles of ideal gas at pressure P in volume V.")
reg("ideal_gas_moles", F, [Param("p", PA), Param("vol", M3), Param("R", RG), Param("temp", K)], MOL,
    lambda p, vol, R, temp: div(p * vol, R * positive(temp, "temperature")), "n = P V / (R T)",
    "Moles of ideal gas at pressure P, volume V and temperature T.")
reg("moles_from_mass", F, [Param("m", M), Param("molar_mass", "kg/mol")], MOL,
    lambda m, molar_mass: div(m, molar_mass, "zero molar mass"), "n = m / M",
    "Amount of substance from mass.")
reg("mass_from_moles", F, [Param("n", MOL), Param("molar_mass", "kg/mol")], M,
    lambda n, molar_mass: n * molar_mass, "m = n M", "Mass of n moles of a substance of molar mass M.")
reg("particles_from_moles", F, [Param("n", MOL), Param("n_a", "1/mol")], "dimensionless",
    lambda n, n_a: n * n_a, "N = n N_A", "Number of particles in n moles (N_A from const).")
reg("carnot_efficiency", F, [Param("t_cold", K), Param("t_hot", K)], "dimensionless",
    lambda t_cold, t_hot: 1 - div(t_cold, positive(t_hot, "hot temperature")), "eta = 1 - Tc / Th",
    "Carnot (maximum) efficiency of a heat engine between Tc and Th (kelvin).")
reg("heat_conduction_rate", F,
    [Param("k", "W/(m*K)"), Param("area", "m^2"), Param("delta_t", K), Param("length", "m")], "W",
    lambda k, area, delta_t, length: div(k * area * delta_t, length, "zero thickness"), "P = k A dT / L",
    "Rate of heat conduction through a slab (Fourier's law).")
reg("first_law_delta_u", F, [Param("q", J), Param("w", J)], J, lambda q, w: q - w, "dU = Q - W",
    "Change of internal energy: heat added minus work done by the system.")
reg("boyle_p2", F, [Param("p1", PA), Param("v1", M3), Param("v2", M3)], PA,
    lambda p1, v1, v2: div(p1 * v1, v2, "boyle_p2: zero volume"), "P2 = P1 V1 / V2",
    "Pressure after an isothermal volume change (Boyle's law).")
reg("boyle_v2", F, [Param("p1", PA), Param("v1", M3), Param("p2", PA)], M3,
    lambda p1, v1, p2: div(p1 * v1, p2, "boyle_v2: zero pressure"), "V2 = P1 V1 / P2",
    "Volume after an isothermal pressure change (Boyle's law).")
reg("charles_v2", F, [Param("v1", M3), Param("t1", K), Param("t2", K)], M3,
    lambda v1, t1, t2: div(v1 * t2, t1, "charles_v2: zero temperature"), "V2 = V1 T2 / T1",
    "Volume after an isobaric temperature change (Charles's law, kelvin).")
reg("gay_lussac_p2", F, [Param("p1", PA), Param("t1", K), Param("t2", K)], PA,
    lambda p1, t1, t2: div(p1 * t2, t1, "gay_lussac_p2: zero temperature"), "P2 = P1 T2 / T1",
    "Pressure after an isochoric temperature change (Gay-Lussac's law, kelvin).")
reg("combined_gas_v2", F, [Param("p1", PA), Param("v1", M3), Param("t1", K), Param("p2", PA), Param("t2", K)],
    M3, lambda p1, v1, t1, p2, t2: div(p1 * v1 * t2, t1 * p2, "zero temperature or pressure"),
    "V2 = P1 V1 T2 / (T1 P2)", "Volume from the combined gas law.")
reg("density", F, [Param("m", M), Param("vol", M3)], "kg/m^3",
    lambda m, vol: div(m, vol, "density: zero volume"), "rho = m / V",
    "Density of a mass m occupying volume V.")
reg("hydrostatic_pressure", F, [Param("rho", "kg/m^3"), Param("g", "m/s^2"), Param("h", "m")], PA,
    lambda rho, g, h: rho * g * h, "P = rho g h", "Gauge pressure at depth h in a fluid of density rho.")
reg("linear_expansion", F, [Param("alpha", "1/K"), Param("length", "m"), Param("delta_t", K)], "m",
    lambda alpha, length, delta_t: alpha * length * delta_t, "dL = alpha L dT",
    "Change of length by thermal expansion.")
reg("radiated_power", F, [Param("emissivity", "dimensionless"), Param("sigma", "W/m^2/K^4"),
    Param("area", "m^2"), Param("temp", K)], "W",
    lambda emissivity, sigma, area, temp: emissivity * sigma * area * temp**4, "P = e sigma A T^4",
    "Power radiated by a surface at temperature T (Stefan-Boltzmann; sigma from const).")
reg("mean_kinetic_energy_gas", F, [Param("k_b", "J/K"), Param("temp", K)], J,
    lambda k_b, temp: 1.5 * k_b * temp, "E = 3/2 k_B T",
    "Mean translational kinetic energy of an ideal-gas molecule (k_B from const).")
