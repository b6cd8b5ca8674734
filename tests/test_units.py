"""Unit parsing: pint strings, currency, count nouns, SciBench LaTeX, scale factors, caching and errors."""

from __future__ import annotations

import math

import pytest

from pcr_ray.core.units import (
    DIMENSIONLESS,
    UnitError,
    canonical_unit,
    convert,
    format_dims,
    normalize_unit_text,
    register_count_unit,
    unit_info,
)

L, M, T = (1, 0, 0, 0, 0, 0, 0, 0, 0), (0, 1, 0, 0, 0, 0, 0, 0, 0), (0, 0, 1, 0, 0, 0, 0, 0, 0)
CUR = (0, 0, 0, 0, 0, 0, 0, 1, 0)
CNT = (0, 0, 0, 0, 0, 0, 0, 0, 1)
SPEED = (1, 0, -1, 0, 0, 0, 0, 0, 0)
FIELD = (1, 1, -3, -1, 0, 0, 0, 0, 0)

CASES = [
    ("m/s", 1.0, SPEED), ("km/h", 1 / 3.6, SPEED), ("mph", 0.44704, SPEED),
    ("kg*m/s^2", 1.0, (1, 1, -2, 0, 0, 0, 0, 0, 0)),
    ("$", 1.0, CUR), ("USD", 1.0, CUR), ("dollars", 1.0, CUR), ("cents", 0.01, CUR), ("eggs", 1.0, CNT),
    ("people", 1.0, CNT), ("item", 1.0, CNT), ("percent", 0.01, DIMENSIONLESS), ("%", 0.01, DIMENSIONLESS),
    (r"\mathrm{~m} / \mathrm{s}", 1.0, SPEED), ("10^4 N/C", 1e4, FIELD), (r"10^{-3} \mathrm{~m}", 1e-3, L),
    (r"\mathrm{kJ} \mathrm{mol}^{-1}", 1000.0, (2, 1, -2, 0, 0, -1, 0, 0, 0)),
    ("s^{-1}", 1.0, (0, 0, -1, 0, 0, 0, 0, 0, 0)),
    (r"\mathrm{~nm}", 1e-9, L), ("square meters", 1.0, (2, 0, 0, 0, 0, 0, 0, 0, 0)), ("hour", 3600.0, T),
    ("W/(m^2*K^4)", 1.0, (0, 1, -3, 0, -4, 0, 0, 0, 0)), ("m/(s^2)", 1.0, (1, 0, -2, 0, 0, 0, 0, 0, 0)),
    ("g", 1e-3, M), ("dimensionless", 1.0, DIMENSIONLESS), ("", 1.0, DIMENSIONLESS),
    (r"\AA", 1e-10, L), ("USD/hour", 1 / 3600, (0, 0, -1, 0, 0, 0, 0, 1, 0)),
    # SciBench worked solutions: revolutions, and LaTeX wrappers with braces nested inside
    ("rev", 2 * math.pi, DIMENSIONLESS), ("revs", 2 * math.pi, DIMENSIONLESS),
    (r"\mathrm{rev} / \mathrm{s}", 2 * math.pi, (0, 0, -1, 0, 0, 0, 0, 0, 0)),
    (r"10^{-5}~\mathrm{m^2~s^{-1}}", 1e-5, (2, 0, -1, 0, 0, 0, 0, 0, 0)),
    (r"\text{~J~mol^{-1}~K^{-1}}", 1.0, (2, 1, -2, 0, -1, -1, 0, 0, 0)),
]


@pytest.mark.parametrize("text,scale,dims", CASES, ids=[c[0] or "empty" for c in CASES])
def test_parse(text, scale, dims):
    info = unit_info(text)
    assert info.dims == dims
    assert info.scale == pytest.approx(scale)


def test_offset_temperatures():
    c = unit_info("degC")
    assert c.to_base(25) == pytest.approx(298.15)
    assert unit_info(r"^{\circ} C").offset == pytest.approx(273.15)
    assert convert(212, "degF", "degC") == pytest.approx(100)


def test_conversion_and_wrong_dimension():
    assert convert(36, "km/h", "m/s") == pytest.approx(10)
    with pytest.raises(UnitError, match="cannot convert"):
        convert(1, "m", "s")


@pytest.mark.parametrize("bad", ["blorps", "m/s/furlongz", "kg**", "1 +", 12, "x" * 300, r"\mathrm{m^{2}"])
def test_bad_units_raise_unit_error(bad):
    with pytest.raises(UnitError):
        unit_info(bad)


def test_register_count_unit():
    register_count_unit("widget")
    assert unit_info("widgets").dims == CNT
    with pytest.raises(UnitError):
        register_count_unit("m")
    with pytest.raises(UnitError):
        register_count_unit("not a name")


def test_cache_returns_same_object():
    assert unit_info("km/h") is unit_info("km/h")


def test_normalize_and_canonical():
    assert normalize_unit_text("10^4 N/C") == (1e4, "N/C")
    assert unit_info(canonical_unit(FIELD)).dims == FIELD and unit_info(canonical_unit(FIELD)).scale == 1.0
    odd = (2, 0, -1, 0, 0, 0, 0, 1, -1)
    assert unit_info(canonical_unit(odd)).dims == odd
    assert format_dims(SPEED) == "[length] / [time]"
