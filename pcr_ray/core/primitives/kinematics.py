"""Kinematics primitives: constant-acceleration motion, free fall, projectiles and circular motion.

Gravity is always an argument `g` (from `const(name="g")` or a given), never a number inside an op.
"""

from __future__ import annotations

import math

from pcr_ray.core.primitives.numeric import div, nonneg, positive, reg, sqrt
from pcr_ray.core.primitives.registry import DomainError, Param

F = "kinematics"
V, A, T, D_, ANG = "m/s", "m/s^2", "s", "m", "dimensionless"


def _time_from_distance(v0: float, a: float, d: float) -> float:
    """Smallest non-negative t with d = v0 t + a t^2 / 2."""
    if a == 0:
        t = div(d, v0, "kin_time_from_distance: zero velocity and zero acceleration")
        if t < 0:
            raise DomainError("kin_time_from_distance: the displacement is never reached")
        return t
    disc = v0 * v0 + 2 * a * d
    s = sqrt(disc, "kin_time_from_distance: the displacement is never reached (negative discriminant)")
    roots = [r for r in ((-v0 - s) / a, (-v0 + s) / a) if r >= -1e-12]
    if not roots:
        raise DomainError("kin_time_from_distance: the displacement is only reached at negative times")
    return max(0.0, min(roots))


def _time_from_velocities(v0: float, v: float, a: float) -> float:
    t = div(v - v0, a, "kin_time_from_velocities: zero acceleration")
    if t < -1e-12:
        raise DomainError("kin_time_from_velocities: negative time (v is reached only before the start)")
    return max(t, 0.0)


def _displacement_from_velocities(v0: float, v: float, a: float) -> float:
    """(v^2 - v0^2) / (2 a), for a change v0 -> v that takes a non-negative time (v - v0) / a."""
    d = div(v * v - v0 * v0, 2 * a, "kin_displacement_from_velocities: zero acceleration")
    if (v - v0) / a < -1e-12:
        raise DomainError("kin_displacement_from_velocities: v is reached only before the start (negative time "
                          "(v - v0) / a): a slowing object's acceleration is negative (neg of a deceleration)")
    return d


def _sin2(theta: float) -> float:
    return math.sin(2 * theta)


reg("kin_displacement", F, [Param("v0", V), Param("a", A), Param("t", T)], D_,
    lambda v0, a, t: v0 * t + 0.5 * a * t * t, "v0 t + a t^2 / 2",
    "Displacement under constant acceleration a after time t, starting at velocity v0.")
reg("kin_final_velocity", F, [Param("v0", V), Param("a", A), Param("t", T)], V, lambda v0, a, t: v0 + a * t,
    "v0 + a t", "Velocity after time t under constant acceleration.")
reg("kin_initial_velocity", F, [Param("v", V), Param("a", A), Param("t", T)], V, lambda v, a, t: v - a * t,
    "v - a t", "Initial velocity from the final velocity, acceleration and time.")
reg("kin_velocity_from_distance", F, [Param("v0", V), Param("a", A), Param("d", D_)], V,
    lambda v0, a, d: sqrt(v0 * v0 + 2 * a * d, "kin_velocity_from_distance: v0^2 + 2 a d is negative"),
    "sqrt(v0^2 + 2 a d)", "Speed after displacement d under constant acceleration (timeless equation).")
reg("kin_time_from_velocities", F, [Param("v0", V), Param("v", V), Param("a", A)], T, _time_from_velocities,
    "(v - v0) / a", "Time to change velocity from v0 to v at constant acceleration a.")
reg("kin_time_from_distance", F, [Param("v0", V), Param("a", A), Param("d", D_)], T, _time_from_distance,
    "smallest t >= 0 with v0 t + a t^2 / 2 = d",
    "Time to cover displacement d from v0 at constant acceleration.")
reg("kin_accel_from_velocities", F, [Param("v0", V), Param("v", V), Param("t", T)], A,
    lambda v0, v, t: div(v - v0, t, "kin_accel_from_velocities: zero time"), "(v - v0) / t",
    "Constant acceleration that changes velocity from v0 to v in time t.")
reg("kin_accel_from_distance", F, [Param("v0", V), Param("v", V), Param("d", D_)], A,
    lambda v0, v, d: div(v * v - v0 * v0, 2 * d, "kin_accel_from_distance: zero displacement"),
    "(v^2 - v0^2) / (2 d)", "Constant acceleration from the velocities at both ends of a displacement d.")
reg("kin_accel_from_displacement_time", F, [Param("v0", V), Param("d", D_), Param("t", T)], A,
    lambda v0, d, t: div(2 * (d - v0 * t), t * t, "zero time"), "2 (d - v0 t) / t^2",
    "Constant acceleration that gives displacement d in time t from initial velocity v0.")
reg("kin_displacement_avg", F, [Param("v0", V), Param("v", V), Param("t", T)], D_,
    lambda v0, v, t: 0.5 * (v0 + v) * t, "(v0 + v) t / 2",
    "Displacement from the average of v0 and v over t.")
reg("kin_displacement_from_velocities", F, [Param("v0", V), Param("v", V), Param("a", A)], D_,
    _displacement_from_velocities, "(v^2 - v0^2) / (2 a)",
    "Displacement while velocity changes from v0 to v at acceleration a (stopping distance).")
reg("average_speed", F, [Param("d", D_), Param("t", T)], V,
    lambda d, t: div(d, t, "average_speed: zero time"), "d / t", "Average speed: distance over elapsed time.")
reg("distance_speed_time", F, [Param("v", V), Param("t", T)], D_, lambda v, t: v * t, "v t",
    "Distance covered at constant speed v in time t.")
reg("time_from_distance", F, [Param("d", D_), Param("v", V)], T,
    lambda d, v: div(d, v, "time_from_distance: zero speed"), "d / v", "Time to cover distance d at speed v.")
reg("free_fall_distance", F, [Param("g", A), Param("t", T)], D_, lambda g, t: 0.5 * g * t * t, "g t^2 / 2",
    "Distance fallen from rest in time t.")
reg("free_fall_time", F, [Param("d", D_), Param("g", A)], T,
    lambda d, g: math.sqrt(div(2 * nonneg(d, "height"), positive(g, "g"))), "sqrt(2 d / g)",
    "Time to fall a height d from rest.")
reg("free_fall_velocity", F, [Param("g", A), Param("d", D_)], V,
    lambda g, d: sqrt(2 * g * d, "free_fall_velocity: g d must be non-negative"), "sqrt(2 g d)",
    "Speed after falling a height d from rest.")
reg("projectile_range", F, [Param("v0", V), Param("theta", ANG), Param("g", A)], D_,
    lambda v0, theta, g: div(v0 * v0 * _sin2(theta), positive(g, "g")), "v0^2 sin(2 theta) / g",
    "Horizontal range of a projectile launched at angle theta over level ground.")
reg("projectile_time_of_flight", F, [Param("v0", V), Param("theta", ANG), Param("g", A)], T,
    lambda v0, theta, g: div(2 * v0 * math.sin(theta), positive(g, "g")), "2 v0 sin(theta) / g",
    "Time of flight of a projectile launched at angle theta over level ground.")
reg("projectile_max_height", F, [Param("v0", V), Param("theta", ANG), Param("g", A)], D_,
    lambda v0, theta, g: div((v0 * math.sin(theta)) ** 2, 2 * positive(g, "g")), "(v0 sin(theta))^2 / (2 g)",
    "Maximum height of a projectile launched at angle theta.")
reg("velocity_x", F, [Param("v", V), Param("theta", ANG)], V, lambda v, theta: v * math.cos(theta),
    "v cos(theta)", "Horizontal component of a velocity at angle theta above the horizontal.")
reg("velocity_y", F, [Param("v", V), Param("theta", ANG)], V, lambda v, theta: v * math.sin(theta),
    "v sin(theta)", "Vertical component of a velocity at angle theta above the horizontal.")
reg("relative_velocity", F, [Param("va", V), Param("vb", V)], V, lambda va, vb: va - vb, "va - vb",
    "Velocity of A relative to B (along one line).")
reg("angular_velocity", F, [Param("v", V), Param("r", D_)], "1/s",
    lambda v, r: div(v, r, "angular_velocity: zero radius"), "omega = v / r",
    "Angular speed (rad/s) of circular motion with speed v at radius r.")
reg("tangential_velocity", F, [Param("omega", "1/s"), Param("r", D_)], V, lambda omega, r: omega * r,
    "v = omega r", "Linear speed at radius r for angular speed omega.")
reg("centripetal_acceleration", F, [Param("v", V), Param("r", D_)], A,
    lambda v, r: div(v * v, r, "centripetal_acceleration: zero radius"), "v^2 / r",
    "Centripetal acceleration of circular motion with speed v at radius r.")
reg("centripetal_accel_omega", F, [Param("omega", "1/s"), Param("r", D_)], A,
    lambda omega, r: omega * omega * r, "omega^2 r",
    "Centripetal acceleration from angular speed omega at radius r.")
reg("circular_period", F, [Param("r", D_), Param("v", V)], T,
    lambda r, v: div(2 * math.pi * r, v, "circular_period: zero speed"), "2 pi r / v",
    "Period of uniform circular motion of radius r at speed v.")
reg("angular_displacement", F, [Param("omega0", "1/s"), Param("alpha", "1/s^2"), Param("t", T)], ANG,
    lambda omega0, alpha, t: omega0 * t + 0.5 * alpha * t * t, "omega0 t + alpha t^2 / 2",
    "Angle turned (rad) under constant angular acceleration.")
reg("angular_final_velocity", F, [Param("omega0", "1/s"), Param("alpha", "1/s^2"), Param("t", T)], "1/s",
    lambda omega0, alpha, t: omega0 + alpha * t, "omega = omega0 + alpha t",
    "Angular velocity (rad/s) after time t under constant angular acceleration alpha.")
reg("angular_accel_from_angle", F, [Param("omega0", "1/s"), Param("omega", "1/s"), Param("theta", ANG)], "1/s^2",
    lambda omega0, omega, theta: div(omega * omega - omega0 * omega0, 2 * theta,
                                     "angular_accel_from_angle: zero angular displacement"),
    "alpha = (omega^2 - omega0^2) / (2 theta)",
    "Constant angular acceleration that changes the angular velocity from omega0 to omega over an angle theta "
    "(rad; the angular timeless equation).")
