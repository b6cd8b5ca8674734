"""Dynamics primitives: Newton's laws, friction, inclines, momentum, collisions, gravitation, springs."""

from __future__ import annotations

import math

from pcr_ray.core.primitives.numeric import div, nonneg, positive, reg
from pcr_ray.core.primitives.registry import DomainError, Param

F = "dynamics"
M, V, A, N, S, L, ANG = "kg", "m/s", "m/s^2", "N", "s", "m", "dimensionless"


GRAV = "N*m^2/kg^2"
INERTIA = "kg*m^2"


def _kepler_period(G: float, m: float, a: float) -> float:
    """2 pi sqrt(a^3 / (G M)) for a positive semi-major axis and a positive G M."""
    return 2 * math.pi * math.sqrt(div(positive(a, "semi-major axis") ** 3, positive(G * m, "G M")))


def _kepler_semi_major_axis(G: float, m: float, period: float) -> float:
    """(G M T^2 / (4 pi^2))^(1/3) for a positive G M."""
    return (positive(G * m, "G M") * period * period / (4 * math.pi**2)) ** (1 / 3)


def _eccentricity(ecc: float, op: str) -> float:
    if not 0 <= ecc < 1:
        raise DomainError(f"{op}: a bound (elliptical) orbit has an eccentricity in [0, 1) (got {ecc:g})")
    return ecc


def _rocket_delta_v(u: float, m0: float, m: float) -> float:
    """u ln(m0 / m) for 0 < m <= m0 (a rocket loses mass as it burns)."""
    positive(m, "rocket: the final mass")
    if m > m0:
        raise DomainError(f"rocket: the final mass m ({m:g}) exceeds the initial mass m0 ({m0:g}); are they swapped?")
    return u * math.log(m0 / m)


def _elastic_v1(m1: float, v1: float, m2: float, v2: float) -> float:
    return div((m1 - m2) * v1 + 2 * m2 * v2, m1 + m2, "collision with zero total mass")


def _elastic_v2(m1: float, v1: float, m2: float, v2: float) -> float:
    return div((m2 - m1) * v2 + 2 * m1 * v1, m1 + m2, "collision with zero total mass")


reg("newton_force", F, [Param("m", M), Param("a", A)], N, lambda m, a: m * a, "F = m a",
    "Net force on mass m with acceleration a (Newton's second law).")
reg("newton_accel", F, [Param("f", N), Param("m", M)], A, lambda f, m: div(f, m, "newton_accel: zero mass"),
    "a = F / m", "Acceleration of mass m under net force F.")
reg("newton_mass", F, [Param("f", N), Param("a", A)], M,
    lambda f, a: div(f, a, "newton_mass: zero acceleration"), "m = F / a",
    "Mass that a net force F accelerates at a.")
reg("weight", F, [Param("m", M), Param("g", A)], N, lambda m, g: m * g, "W = m g",
    "Weight of mass m in field g.")
reg("mass_from_weight", F, [Param("w", N), Param("g", A)], M,
    lambda w, g: div(w, g, "mass_from_weight: g = 0"), "m = W / g", "Mass from a weight W in field g.")
reg("friction_force", F, [Param("mu", "dimensionless"), Param("n", N)], N, lambda mu, n: mu * n, "f = mu N",
    "Friction force from coefficient mu and normal force N.")
reg("friction_coefficient", F, [Param("f", N), Param("n", N)], "dimensionless",
    lambda f, n: div(f, n, "friction_coefficient: zero normal force"), "mu = f / N",
    "Friction coefficient from the friction force and the normal force.")
reg("normal_force_incline", F, [Param("m", M), Param("g", A), Param("theta", ANG)], N,
    lambda m, g, theta: m * g * math.cos(theta), "N = m g cos(theta)",
    "Normal force on a mass on an incline.")
reg("gravity_along_incline", F, [Param("m", M), Param("g", A), Param("theta", ANG)], N,
    lambda m, g, theta: m * g * math.sin(theta), "m g sin(theta)",
    "Component of weight along an incline of angle theta.")
reg("incline_acceleration", F, [Param("g", A), Param("theta", ANG), Param("mu", "dimensionless")], A,
    lambda g, theta, mu: g * (math.sin(theta) - mu * math.cos(theta)), "g (sin(theta) - mu cos(theta))",
    "Acceleration down an incline with kinetic friction coefficient mu (0 for frictionless).")
reg("momentum", F, [Param("m", M), Param("v", V)], "kg*m/s", lambda m, v: m * v, "p = m v",
    "Linear momentum.")
reg("velocity_from_momentum", F, [Param("p", "kg*m/s"), Param("m", M)], V,
    lambda p, m: div(p, m, "velocity_from_momentum: zero mass"), "v = p / m",
    "Velocity from momentum and mass.")
reg("impulse", F, [Param("f", N), Param("t", S)], "N*s", lambda f, t: f * t, "J = F t",
    "Impulse of a constant force F acting for time t.")
reg("impulse_from_momentum_change", F, [Param("m", M), Param("v0", V), Param("v", V)], "N*s",
    lambda m, v0, v: m * (v - v0), "J = m (v - v0)", "Impulse equal to the change of momentum.")
reg("average_force_from_impulse", F, [Param("j", "N*s"), Param("t", S)], N,
    lambda j, t: div(j, t, "zero contact time"), "F = J / t", "Average force from an impulse over a time t.")
reg("centripetal_force", F, [Param("m", M), Param("v", V), Param("r", L)], N,
    lambda m, v, r: div(m * v * v, r, "centripetal_force: zero radius"), "F = m v^2 / r",
    "Centripetal force on mass m moving at speed v on radius r.")
reg("gravitational_force", F, [Param("G", "N*m^2/kg^2"), Param("m1", M), Param("m2", M), Param("r", L)], N,
    lambda G, m1, m2, r: div(G * m1 * m2, r * r, "gravitational_force: zero distance"), "F = G m1 m2 / r^2",
    "Newtonian gravitational attraction between two masses (G from const).")
reg("gravitational_field", F, [Param("G", "N*m^2/kg^2"), Param("m", M), Param("r", L)], A,
    lambda G, m, r: div(G * m, r * r, "gravitational_field: zero distance"), "g = G M / r^2",
    "Gravitational acceleration at distance r from mass M.")
reg("orbital_speed", F, [Param("G", "N*m^2/kg^2"), Param("m", M), Param("r", L)], V,
    lambda G, m, r: math.sqrt(div(G * m, r, "orbital_speed: zero radius")), "v = sqrt(G M / r)",
    "Speed of a circular orbit of radius r around mass M.")
reg("spring_force", F, [Param("k", "N/m"), Param("x", L)], N, lambda k, x: k * x, "F = k x",
    "Magnitude of a spring force (Hooke's law) for extension x.")
reg("spring_extension", F, [Param("f", N), Param("k", "N/m")], L,
    lambda f, k: div(f, k, "spring_extension: zero spring constant"), "x = F / k",
    "Extension of a spring of constant k under force F.")
reg("spring_constant", F, [Param("f", N), Param("x", L)], "N/m",
    lambda f, x: div(f, x, "spring_constant: zero extension"), "k = F / x",
    "Spring constant from force and extension.")
reg("torque", F, [Param("f", N), Param("r", L)], "N*m", lambda f, r: f * r, "tau = r F",
    "Torque of a force applied perpendicular at lever arm r.")
reg("torque_angle", F, [Param("f", N), Param("r", L), Param("theta", ANG)], "N*m",
    lambda f, r, theta: f * r * math.sin(theta), "tau = r F sin(theta)",
    "Torque of a force at angle theta to the lever arm r.")
reg("elastic_collision_v1", F, [Param("m1", M), Param("v1", V), Param("m2", M), Param("v2", V)], V,
    _elastic_v1, "v1' = ((m1 - m2) v1 + 2 m2 v2) / (m1 + m2)",
    "Final velocity of body 1 after a 1-D elastic collision.")
reg("elastic_collision_v2", F, [Param("m1", M), Param("v1", V), Param("m2", M), Param("v2", V)], V,
    _elastic_v2, "v2' = ((m2 - m1) v2 + 2 m1 v1) / (m1 + m2)",
    "Final velocity of body 2 after a 1-D elastic collision.")
reg("perfectly_inelastic_velocity", F, [Param("m1", M), Param("v1", V), Param("m2", M), Param("v2", V)], V,
    lambda m1, v1, m2, v2: div(m1 * v1 + m2 * v2, m1 + m2, "zero total mass"), "(m1 v1 + m2 v2) / (m1 + m2)",
    "Common velocity after a perfectly inelastic collision (bodies stick).")
reg("tension_hanging", F, [Param("m", M), Param("g", A), Param("a", A)], N, lambda m, g, a: m * (g + a),
    "T = m (g + a)", "Tension in a rope holding mass m accelerating upward at a (a = 0 at rest).")
reg("atwood_acceleration", F, [Param("m1", M), Param("m2", M), Param("g", A)], A,
    lambda m1, m2, g: div((m1 - m2) * g, m1 + m2, "zero total mass"), "a = (m1 - m2) g / (m1 + m2)",
    "Acceleration of an ideal Atwood machine (m1 descends when positive).")
reg("pressure", F, [Param("f", N), Param("area", "m^2")], "Pa",
    lambda f, area: div(f, area, "pressure: zero area"), "P = F / A", "Pressure from a force over an area.")
reg("buoyant_force", F, [Param("rho", "kg/m^3"), Param("g", A), Param("vol", "m^3")], N,
    lambda rho, g, vol: rho * g * vol, "F_b = rho g V",
    "Buoyant force on displaced fluid volume V (Archimedes).")
reg("inertia_solid_disk", F, [Param("m", M), Param("r", L)], INERTIA, lambda m, r: 0.5 * m * r * r,
    "I = M R^2 / 2", "Moment of inertia of a solid disk or cylinder of mass M and radius R about its axis.")
reg("inertia_solid_sphere", F, [Param("m", M), Param("r", L)], INERTIA, lambda m, r: 0.4 * m * r * r,
    "I = 2 M R^2 / 5", "Moment of inertia of a solid sphere of mass M and radius R about a diameter.")
reg("inertia_hoop", F, [Param("m", M), Param("r", L)], INERTIA, lambda m, r: m * r * r, "I = M R^2",
    "Moment of inertia of a thin hoop (ring, thin-walled cylinder) about its axis, or of a point mass at R.")
reg("inertia_rod_center", F, [Param("m", M), Param("length", L)], INERTIA,
    lambda m, length: m * length * length / 12, "I = M L^2 / 12",
    "Moment of inertia of a thin rod of mass M and length L about a perpendicular axis through its center.")
reg("tidal_acceleration", F, [Param("G", GRAV), Param("m", M), Param("r", L), Param("dr", L)], A,
    lambda G, m, r, dr: -div(2 * G * m * dr, r**3, "tidal_acceleration: zero distance"),
    "d a_g = -2 G M dr / r^3",
    "Change of the gravitational acceleration G M / r^2 across a small radial extent dr at distance r from M "
    "(negative: the far end is pulled less; its magnitude is the tidal stretching).")
reg("kepler_period", F, [Param("G", GRAV), Param("m", M), Param("a", L)], S, _kepler_period,
    "T = 2 pi sqrt(a^3 / (G M))",
    "Orbital period for a semi-major axis a around a central mass M (Kepler's third law; a Hohmann transfer "
    "takes half the period of its ellipse).")
reg("kepler_semi_major_axis", F, [Param("G", GRAV), Param("m", M), Param("period", S)], L,
    _kepler_semi_major_axis, "a = (G M T^2 / (4 pi^2))^(1/3)",
    "Semi-major axis of an orbit of period T around a central mass M (Kepler's third law).")
reg("perihelion_distance", F, [Param("a", L), Param("ecc", ANG)], L,
    lambda a, ecc: a * (1 - _eccentricity(ecc, "perihelion_distance")), "r_min = a (1 - e)",
    "Closest distance (perihelion, periapsis) of an elliptical orbit of semi-major axis a and eccentricity e.")
reg("aphelion_distance", F, [Param("a", L), Param("ecc", ANG)], L,
    lambda a, ecc: a * (1 + _eccentricity(ecc, "aphelion_distance")), "r_max = a (1 + e)",
    "Farthest distance (aphelion, apoapsis) of an elliptical orbit of semi-major axis a and eccentricity e.")
reg("rocket_delta_v", F, [Param("u", V), Param("m0", M), Param("m", M)], V, _rocket_delta_v,
    "dv = u ln(m0 / m)",
    "Speed gained by a rocket with exhaust speed u burning from mass m0 down to m, without gravity "
    "(Tsiolkovsky's rocket equation).")
reg("rocket_burnout_speed", F, [Param("u", V), Param("m0", M), Param("m", M), Param("g", A), Param("t", S)], V,
    lambda u, m0, m, g, t: _rocket_delta_v(u, m0, m) - g * nonneg(t, "burn time"), "v = u ln(m0 / m) - g t",
    "Speed at burnout of a rocket launched vertically from rest that burns from m0 down to m in time t in "
    "gravity g.")
