"""Thermodynamics primitives: heat, gas laws, entropy, Gibbs energy, kinetic theory and Boltzmann populations.

Temperatures are kelvin in base units (a given in degC is converted with its offset); parameters named
`delta_t` are temperature differences with the dimension K.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pcr_ray.core.primitives.numeric import as_int, div, positive, reg, require, values_free
from pcr_ray.core.primitives.registry import DomainError, OutRule, Param
from pcr_ray.core.units import Dims, dims_of_unit

F = "thermodynamics"
M, C, K, J, PA, M3, MOL = "kg", "J/(kg*K)", "K", "J", "Pa", "m^3", "mol"
RG = "J/(mol*K)"
S_, KB, MM, JM = "J/K", "J/K", "kg/mol", "J/mol"
_GIBBS_DIMS = (dims_of_unit("J"), dims_of_unit(JM))


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


def _log_ratio(x: float, y: float, what: str) -> float:
    """ln(x / y) for two positive values of `what`."""
    return math.log(positive(x, what) / positive(y, what))


def _energy_or_molar_energy(op: str, arg: str) -> OutRule:
    """Output rule: `arg` is an energy (J) or a molar energy (J/mol); the output has its dimension."""

    def rule(dims: Mapping[str, Dims], _v: Mapping[str, Any]) -> Dims:
        require(dims[arg] in _GIBBS_DIMS, f"{op}: '{arg}' must be an energy or a molar energy (J or J/mol)")
        return dims[arg]

    return values_free(rule)


def _gibbs_helmholtz(dg1: float, t1: float, dh: float, t2: float) -> float:
    """T2 (dG1 / T1 + dH (1/T2 - 1/T1)) for positive kelvin temperatures."""
    t1, t2 = positive(t1, "gibbs_helmholtz: T1"), positive(t2, "gibbs_helmholtz: T2")
    return t2 * (dg1 / t1 + dh * (1 / t2 - 1 / t1))


def _gas_speed(factor: float, R: float, temp: float, molar_mass: float) -> float:
    """sqrt(factor R T / M) for a positive molar mass and a non-negative kelvin temperature."""
    if temp < 0:
        raise DomainError(f"gas speed: the temperature must not be negative kelvin (got {temp:g})")
    return math.sqrt(div(factor * R * temp, positive(molar_mass, "molar mass")))


def _oscillator_population(n: float, de: float, k_b: float, temp: float) -> float:
    """e^(-n x) (1 - e^(-x)) with x = dE / (k T): the fraction of harmonic oscillators in level n."""
    level = as_int(n, "oscillator_level_population: the level n", 0)
    x = div(de, k_b * positive(temp, "temperature"), "zero Boltzmann constant")
    if x <= 0:
        raise DomainError("oscillator_level_population: the level spacing dE must be positive")
    return math.exp(-level * x) * -math.expm1(-x)


reg("entropy_isothermal_volume", F, [Param("n", MOL), Param("R", RG), Param("v_i", M3), Param("v_f", M3)], S_,
    lambda n, R, v_i, v_f: n * R * _log_ratio(v_f, v_i, "volume"), "dS = n R ln(V_f / V_i)",
    "Entropy change of n moles of ideal gas expanded isothermally from V_i to V_f.")
reg("entropy_isothermal_pressure", F, [Param("n", MOL), Param("R", RG), Param("p_i", PA), Param("p_f", PA)], S_,
    lambda n, R, p_i, p_f: n * R * _log_ratio(p_i, p_f, "pressure"), "dS = n R ln(P_i / P_f)",
    "Entropy change of n moles of ideal gas taken isothermally from pressure P_i to P_f.")
reg("entropy_heating", F, [Param("n", MOL), Param("c_m", RG), Param("t_i", K), Param("t_f", K)], S_,
    lambda n, c_m, t_i, t_f: n * c_m * _log_ratio(t_f, t_i, "kelvin temperature"), "dS = n C_m ln(T_f / T_i)",
    "Entropy change of n moles heated from T_i to T_f at a constant molar heat capacity C_m (C_P or C_V).")
reg("entropy_heating_mass", F, [Param("m", M), Param("c", C), Param("t_i", K), Param("t_f", K)], S_,
    lambda m, c, t_i, t_f: m * c * _log_ratio(t_f, t_i, "kelvin temperature"), "dS = m c ln(T_f / T_i)",
    "Entropy change of a mass m heated from T_i to T_f at a constant specific heat c.")
reg("gibbs_helmholtz", F, [Param("dg1"), Param("t1", K), Param("dh", "=dg1"), Param("t2", K)],
    _energy_or_molar_energy("gibbs_helmholtz", "dg1"), _gibbs_helmholtz,
    "dG2 = T2 (dG1 / T1 + dH (1/T2 - 1/T1))",
    "Gibbs energy change at T2 from its value at T1, with the enthalpy change dH constant (Gibbs-Helmholtz).")
reg("gibbs_from_cell_potential", F, [Param("n", "dimensionless"), Param("F", "C/mol"), Param("e_cell", "V")], JM,
    lambda n, F, e_cell: -n * F * e_cell, "dG = -n F E",
    "Molar Gibbs energy change of a redox reaction transferring n electrons at cell potential E (F from const).")
reg("cell_potential_from_gibbs", F, [Param("dg", JM), Param("n", "dimensionless"), Param("F", "C/mol")], "V",
    lambda dg, n, F: -div(dg, n * F, "cell_potential_from_gibbs: zero electrons or zero F"), "E = -dG / (n F)",
    "Cell potential of a redox reaction transferring n electrons with molar Gibbs energy change dG.")
reg("mean_speed_gas", F, [Param("R", RG), Param("temp", K), Param("molar_mass", MM)], "m/s",
    lambda R, temp, molar_mass: _gas_speed(8 / math.pi, R, temp, molar_mass), "v_mean = sqrt(8 R T / (pi M))",
    "Mean speed of the molecules of an ideal gas of molar mass M at temperature T (Maxwell-Boltzmann).")
reg("rms_speed_gas", F, [Param("R", RG), Param("temp", K), Param("molar_mass", MM)], "m/s",
    lambda R, temp, molar_mass: _gas_speed(3.0, R, temp, molar_mass), "v_rms = sqrt(3 R T / M)",
    "Root-mean-square speed of the molecules of an ideal gas of molar mass M at temperature T.")
reg("most_probable_speed_gas", F, [Param("R", RG), Param("temp", K), Param("molar_mass", MM)], "m/s",
    lambda R, temp, molar_mass: _gas_speed(2.0, R, temp, molar_mass), "v_mp = sqrt(2 R T / M)",
    "Most probable molecular speed of an ideal gas of molar mass M at temperature T (Maxwell-Boltzmann).")
reg("mean_free_path", F, [Param("k_b", KB), Param("temp", K), Param("sigma", "m^2"), Param("p", PA)], "m",
    lambda k_b, temp, sigma, p: div(k_b * temp, math.sqrt(2) * sigma * p, "mean_free_path: zero cross section "
                                    "or pressure"), "lambda = k T / (sqrt(2) sigma P)",
    "Mean free path of an ideal-gas molecule with collisional cross section sigma at T and P (k_B from const).")
reg("gas_diffusion_coefficient", F, [Param("v_mean", "m/s"), Param("lam", "m")], "m^2/s",
    lambda v_mean, lam: v_mean * lam / 3, "D = v_mean lambda / 3",
    "Self-diffusion coefficient of a gas from its mean molecular speed and mean free path (kinetic theory).")
reg("thermal_wavelength", F, [Param("h", "J*s"), Param("m", M), Param("k_b", KB), Param("temp", K)], "m",
    lambda h, m, k_b, temp: div(h, math.sqrt(2 * math.pi * positive(m, "particle mass") * k_b
                                             * positive(temp, "temperature")), "zero Boltzmann constant"),
    "Lambda = h / sqrt(2 pi m k T)", "Thermal de Broglie wavelength of a particle of mass m at temperature T.")
reg("boltzmann_ratio", F, [Param("de", J), Param("k_b", KB), Param("temp", K)], "dimensionless",
    lambda de, k_b, temp: math.exp(-div(de, k_b * positive(temp, "temperature"), "zero Boltzmann constant")),
    "N_upper / N_lower = exp(-dE / (k T))",
    "Boltzmann population ratio of two (non-degenerate) levels an energy dE apart at temperature T.")
reg("oscillator_level_population", F,
    [Param("n", "dimensionless"), Param("de", J), Param("k_b", KB), Param("temp", K)], "dimensionless",
    _oscillator_population, "p_n = exp(-n x) (1 - exp(-x)), x = dE / (k T)",
    "Fraction of harmonic oscillators (level spacing dE, e.g. h c nu~) in vibrational level n at temperature T.")
