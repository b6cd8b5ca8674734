"""Physical constants by name, kept as data: `const(name)` is the only way a trace brings in a constant."""

from __future__ import annotations

from pcr_ray.core.primitives.registry import Param, Primitive, register
from pcr_ray.core.units import unit_info

# name -> (value, unit, description); values are CODATA 2018 / conventional.
CONSTANTS: dict[str, tuple[float, str, str]] = {
    "g": (9.80665, "m/s^2", "standard gravity"),
    "c": (299792458.0, "m/s", "speed of light in vacuum"),
    "G": (6.67430e-11, "N*m^2/kg^2", "gravitational constant"),
    "k_B": (1.380649e-23, "J/K", "Boltzmann constant"),
    "R": (8.314462618, "J/(mol*K)", "molar gas constant"),
    "F": (96485.33212, "C/mol", "Faraday constant"),
    "N_A": (6.02214076e23, "1/mol", "Avogadro constant"),
    "e": (1.602176634e-19, "C", "elementary charge"),
    "h": (6.62607015e-34, "J*s", "Planck constant"),
    "hbar": (1.054571817e-34, "J*s", "reduced Planck constant"),
    "k_e": (8.9875517923e9, "N*m^2/C^2", "Coulomb constant"),
    "epsilon_0": (8.8541878128e-12, "F/m", "vacuum permittivity"),
    "mu_0": (1.25663706212e-6, "H/m", "vacuum permeability"),
    "m_e": (9.1093837015e-31, "kg", "electron mass"),
    "m_p": (1.67262192369e-27, "kg", "proton mass"),
    "sigma": (5.670374419e-8, "W/(m^2*K^4)", "Stefan-Boltzmann constant"),
    "atm": (101325.0, "Pa", "standard atmosphere"),
    "v_sound": (343.0, "m/s", "speed of sound in air at 20 degC"),
    "rho_water": (1000.0, "kg/m^3", "density of water"),
    "c_water": (4186.0, "J/(kg*K)", "specific heat of water"),
    "L_f_water": (334000.0, "J/kg", "latent heat of fusion of water"),
    "L_v_water": (2.256e6, "J/kg", "latent heat of vaporization of water"),
    "M_earth": (5.972e24, "kg", "mass of the Earth"),
    "R_earth": (6.371e6, "m", "mean radius of the Earth"),
    "pi": (3.141592653589793, "dimensionless", "pi"),
    "e_num": (2.718281828459045, "dimensionless", "Euler's number"),
    "minutes_per_hour": (60.0, "dimensionless", "60 minutes in an hour"),
    "hours_per_day": (24.0, "dimensionless", "24 hours in a day"),
    "days_per_week": (7.0, "dimensionless", "7 days in a week"),
    "months_per_year": (12.0, "dimensionless", "12 months in a year"),
    "weeks_per_year": (52.0, "dimensionless", "52 weeks in a year"),
    "dozen": (12.0, "dimensionless", "12 in a dozen"),
}


def constant_dims(name: str):
    return unit_info(CONSTANTS[name][1]).dims


def constant_base_value(name: str) -> float:
    value, unit, _ = CONSTANTS[name]
    return unit_info(unit).to_base(value)


def _const_rule(_dims, values):
    return constant_dims(values["name"])


CONST: Primitive = register(
    "const", "constants", [Param("name", kind="name", choices=tuple(CONSTANTS))], _const_rule,
    constant_base_value, "constant[name]", "A physical or counting constant by name (g, c, G, k_B, R, N_A, e, ...).",
)
