"""Waves and optics primitives: wave relations, photons, refraction, thin lenses, oscillators, Doppler."""

from __future__ import annotations

import math

from pcr_ray.core.primitives.numeric import div, positive, reg
from pcr_ray.core.primitives.registry import DomainError, Param

F = "waves_optics"
HZ, M, S, V, ANG, D = "Hz", "m", "s", "m/s", "dimensionless", "dimensionless"
H = "J*s"


def _snell(n1: float, theta1: float, n2: float) -> float:
    s = div(n1 * math.sin(theta1), n2, "snell_angle: zero refractive index")
    if abs(s) > 1.0:
        if abs(s) - 1.0 <= 1e-12:
            s = math.copysign(1.0, s)
        else:
            raise DomainError("snell_angle: total internal reflection (n1 sin(theta1) / n2 > 1)")
    return math.asin(s)


def _critical_angle(n1: float, n2: float) -> float:
    if not 0 < n2 <= n1:
        raise DomainError("critical_angle: needs n1 >= n2 > 0 (light going into a less dense medium)")
    return math.asin(n2 / n1)


def _thin_lens(focal: float, d_o: float) -> float:
    inv = div(1.0, focal, "zero focal length") - div(1.0, d_o, "zero object distance")
    return div(1.0, inv, "object at the focal point: the image is at infinity")


def _doppler(f: float, v_wave: float, v_obs: float, v_src: float) -> float:
    den = v_wave - v_src
    if den <= 0:
        raise DomainError("doppler_frequency: the source moves at or above the wave speed")
    return f * (v_wave + v_obs) / den


reg("wave_speed", F, [Param("f", HZ), Param("lam", M)], V, lambda f, lam: f * lam, "v = f lambda",
    "Wave speed from frequency and wavelength.")
reg("wavelength", F, [Param("v", V), Param("f", HZ)], M, lambda v, f: div(v, f, "wavelength: zero frequency"),
    "lambda = v / f", "Wavelength from wave speed and frequency.")
reg("frequency", F, [Param("v", V), Param("lam", M)], HZ,
    lambda v, lam: div(v, lam, "frequency: zero wavelength"), "f = v / lambda",
    "Frequency from wave speed and wavelength.")
reg("period", F, [Param("f", HZ)], S, lambda f: div(1.0, f, "period: zero frequency"), "T = 1 / f",
    "Period of an oscillation of frequency f.")
reg("frequency_from_period", F, [Param("t", S)], HZ,
    lambda t: div(1.0, t, "frequency_from_period: zero period"), "f = 1 / T",
    "Frequency of an oscillation of period T.")
reg("angular_frequency", F, [Param("f", HZ)], "1/s", lambda f: 2 * math.pi * f, "omega = 2 pi f",
    "Angular frequency (rad/s) from frequency.")
reg("photon_energy", F, [Param("h", H), Param("f", HZ)], "J", lambda h, f: h * f, "E = h f",
    "Energy of a photon of frequency f (h from const).")
reg("photon_energy_wavelength", F, [Param("h", H), Param("c", V), Param("lam", M)], "J",
    lambda h, c, lam: div(h * c, lam, "zero wavelength"), "E = h c / lambda",
    "Energy of a photon of wavelength lambda (h, c from const).")
reg("photon_wavelength_from_energy", F, [Param("h", H), Param("c", V), Param("e", "J")], M,
    lambda h, c, e: div(h * c, e, "zero energy"), "lambda = h c / E", "Wavelength of a photon of energy E.")
reg("de_broglie_wavelength", F, [Param("h", H), Param("p", "kg*m/s")], M,
    lambda h, p: div(h, p, "zero momentum"), "lambda = h / p",
    "De Broglie wavelength of a particle of momentum p.")
reg("index_from_speed", F, [Param("c", V), Param("v", V)], D, lambda c, v: div(c, v, "zero speed"),
    "n = c / v", "Refractive index from the speed of light in the medium.")
reg("speed_in_medium", F, [Param("c", V), Param("n", D)], V, lambda c, n: div(c, n, "zero refractive index"),
    "v = c / n", "Speed of light in a medium of refractive index n.")
reg("snell_angle", F, [Param("n1", D), Param("theta1", ANG), Param("n2", D)], ANG, _snell,
    "theta2 = asin(n1 sin(theta1) / n2)",
    "Refraction angle by Snell's law (error on total internal reflection).")
reg("critical_angle", F, [Param("n1", D), Param("n2", D)], ANG, _critical_angle, "theta_c = asin(n2 / n1)",
    "Critical angle for total internal reflection from medium n1 into n2 (n1 > n2).")
reg("thin_lens_image_distance", F, [Param("focal", M), Param("d_o", M)], M, _thin_lens, "1/d_i = 1/f - 1/d_o",
    "Image distance from a thin lens (or mirror) equation; negative = virtual image.")
reg("thin_lens_focal_length", F, [Param("d_o", M), Param("d_i", M)], M,
    lambda d_o, d_i: div(1.0, div(1.0, d_o, "zero distance") + div(1.0, d_i, "zero distance"), "no focus"),
    "f = 1 / (1/d_o + 1/d_i)", "Focal length from object and image distances.")
reg("magnification", F, [Param("d_i", M), Param("d_o", M)], D,
    lambda d_i, d_o: -div(d_i, d_o, "zero distance"), "m = -d_i / d_o",
    "Lateral magnification of a thin lens or mirror (negative = inverted).")
reg("lens_power", F, [Param("focal", M)], "1/m", lambda focal: div(1.0, focal, "zero focal length"),
    "P = 1 / f", "Optical power (diopters) of a lens of focal length f.")
reg("pendulum_period", F, [Param("length", M), Param("g", "m/s^2")], S,
    lambda length, g: 2 * math.pi * math.sqrt(div(length, positive(g, "g"))), "T = 2 pi sqrt(L / g)",
    "Period of a simple pendulum of length L (small angles).")
reg("spring_period", F, [Param("m", "kg"), Param("k", "N/m")], S,
    lambda m, k: 2 * math.pi * math.sqrt(div(m, positive(k, "spring constant"))), "T = 2 pi sqrt(m / k)",
    "Period of a mass m on a spring of constant k.")
reg("doppler_frequency", F, [Param("f", HZ), Param("v_wave", V), Param("v_obs", V), Param("v_src", V)], HZ,
    _doppler, "f' = f (v + v_obs) / (v - v_src)",
    "Observed frequency; v_obs > 0 when the observer moves toward the source, v_src > 0 when the source "
    "moves toward the observer.")
reg("beat_frequency", F, [Param("f1", HZ), Param("f2", HZ)], HZ, lambda f1, f2: abs(f1 - f2), "|f1 - f2|",
    "Beat frequency of two tones.", commutative=True)
reg("string_harmonic_frequency", F, [Param("n", D), Param("v", V), Param("length", M)], HZ,
    lambda n, v, length: div(n * v, 2 * length, "zero length"), "f_n = n v / (2 L)",
    "n-th harmonic of a string (or open pipe) of length L with wave speed v.")
reg("sound_intensity_level", F, [Param("i"), Param("i0", "=i")], D,
    lambda i, i0: 10 * math.log10(positive(div(i, i0, "zero reference intensity"), "intensity ratio")),
    "L = 10 log10(I / I0)", "Sound level in decibels (a dimensionless number) from an intensity ratio.")
