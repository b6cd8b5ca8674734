"""Givens extraction: numbers, units, LaTeX, words; the target; the measured accuracy; the plug-in protocol."""

from __future__ import annotations

import math

import pytest

from pcr_ray.core.trace import Given
from pcr_ray.core.units import unit_info
from pcr_ray.data.givens import (
    Extraction,
    GivensExtractor,
    RuleBasedExtractor,
    Target,
    extract,
    extract_target,
    given_kind,
    given_matches,
    read_unit,
    score_extraction,
    used_givens,
)
from pcr_ray.data.physics import generate_problems


def _vu(text):
    return [(g.value, g.unit) for g in extract(text).givens]


def _has(text, value, unit):
    base = unit_info(unit)
    for g in extract(text).givens:
        info = unit_info(g.unit)
        if info.dims == base.dims and math.isclose(info.to_base(g.value), base.to_base(value), rel_tol=1e-9):
            return True
    return False


@pytest.mark.parametrize("text,value,unit", [
    ("The town has 1,250 people.", 1250, "person"),
    ("A rod 0.75 m long.", 0.75, "m"),
    ("It costs $3.50 each.", 3.5, "USD"),
    ("Light travels at 3.0 x 10^8 m/s.", 3.0e8, "m/s"),
    ("Light travels at 3e8 m/s.", 3.0e8, "m/s"),
    ("A charge of $1.6 \\times 10^{-19} \\mathrm{~C}$ moves.", 1.6e-19, "C"),
    ("A mass of $1000 \\mathrm{~kg}$ moves at $20 \\mathrm{~km} / \\mathrm{h}$.", 20, "km/h"),
    ("An automobile with a mass of $1000 \\mathrm{~kg}$.", 1000, "kg"),
    ("It accelerates at 2.5 m/s^2.", 2.5, "m/s^2"),
    ("It accelerates at 1.5 meters per second squared.", 1.5, "m/s^2"),
    ("A 500 g ball.", 0.5, "kg"),
    ("It waited 4 minutes.", 240, "s"),
    ("The plate is 3 square meters.", 3, "m^2"),
    ("Water at 25 °C.", 25, "degC"),
    ("Water at 25 degrees Celsius.", 25, "degC"),
    ("Water is heated by 20 °C.", 20, "delta_degC"),  # a change: 20 K, not 293.15 K
    ("A temperature rise of 15 degrees Celsius.", 15, "delta_degC"),
    ("It cools from 80 °C to 20 °C.", 80, "degC"),
    ("A $4.7 \\mu \\mathrm{F}$ capacitor.", 4.7e-6, "F"),
    ("A 220 Ω resistor.", 220, "ohm"),
    ("She ran three miles.", 3, "mile"),
    ("He bought a dozen eggs.", 12, "egg"),
    ("It took half an hour.", 0.5, "hour"),
    ("He read 3/4 of the book.", 0.75, "dimensionless"),
    ("She is 2 1/2 years older.", 2.5, "year"),
    ("The car starts from rest.", 0, "m/s"),
    ("A parked car is hit.", 0, "m/s"),
    ("He has twice as many.", 2, "dimensionless"),
    ("Save 20% on shoes.", 20, "dimensionless"),
    ("The bill was $1.5 million.", 1.5e6, "USD"),
    ("A 120-page book.", 120, "page"),
    # SciBench worked solutions (Engel, Halliday)
    ("$T_i=300 . \\mathrm{K}$ and $P_i=1.00$ bar", 300, "K"),  # a trailing decimal point: 300. K
    ("irradiated with 100. W of 280. nm light", 280e-9, "m"),
    ("irradiated with 100. W of 280. nm light", 100, "W"),
    ("in $20.0 \\mathrm{rev}$, at constant angular acceleration", 20, "rev"),
    ("$C_{P, m}$ for $\\mathrm{Hg}(l)=27.98 \\mathrm{~J} \\mathrm{~mol}^{-1} \\mathrm{~K}^{-1}$.", 27.98, "J/(mol*K)"),
    ("the specific volume is $0.703 \\mathrm{~cm}^3 \\mathrm{~g}^{-1}$.", 0.703, "cm^3/g"),
    ("and $\\eta=1.002 \\mathrm{cP}$.", 1.002e-3, "Pa*s"),
    ("at $293 \\mathrm{~K}(\\eta=146 \\mu \\mathrm{P})$ through", 146e-7, "Pa*s"),
    ("the densities of graphite and diamond are 2.25 and $3.52 \\mathrm{~kg} / \\mathrm{L}$", 2.25, "kg/L"),
])
def test_quantities(text, value, unit):
    assert _has(text, value, unit), (text, _vu(text))


def test_english_words_are_not_units():
    # 'a' (annum), 'in' (inch), 'at' (technical atmosphere) are pint units; they must not be read as such
    assert read_unit(" in the box", 0) == ("", 0)
    assert read_unit(" a day", 0)[0] == "day" or read_unit(" a day", 0) == ("", 0)
    vu = _vu("He is 5 in the morning and 6 at noon, 7 a piece.")
    assert (5.0, "inch") not in vu and (6.0, "at") not in vu
    assert all(u in ("", "dimensionless", "item") for _, u in vu), vu


def test_a_sentence_end_and_a_bare_count_keep_no_unit():
    assert _vu("He has 12. A friend gives him 3.") == [(12.0, "dimensionless"), (3.0, "dimensionless")]
    assert (3.0, "apple") not in _vu("She has 3 and 4 apples.")  # counts and money do not spread to a bare number
    assert (5.0, "USD") not in _vu("He paid 5 and $7.")


def test_exponents_and_ranges_are_not_numbers():
    vals = [v for v, _ in _vu("It moves at 3 m/s^2 and 10^{-3} kg m^2 and 5 J K^-1 mol^-1.")]
    assert 2.0 not in vals and -1.0 not in vals and 3.0 in vals


@pytest.mark.parametrize("text,unit,dims_of", [
    ("A car moves at 20 m/s for 5 s. How far does it go in kilometers?", "km", "m"),
    ("... How far does it go?", None, "m"),
    ("... How long does it take to stop?", None, "s"),
    ("... What force acts on it?", None, "N"),
    ("... How many dollars did she spend?", None, "USD"),
    ("... How much money does she have left?", None, "USD"),
    ("... What is its kinetic energy in kilojoules?", "kJ", "J"),
    ("... Express your answer in km/h.", "km/hour", "m/s"),
    ("... How many minutes does it take?", "minute", "s"),
    ("... How many eggs are left?", "egg", "item"),
    ("... What is the current (in mA)?", "mA", "A"),
    ("... What percentage of the class passed?", None, "percent"),
    ("... What is the final temperature in °C?", "degC", "K"),
    ("... By how much does the temperature rise, in °C?", "delta_degC", "K"),
    ("... What is the temperature change of the water (in degrees Fahrenheit)?", "delta_degF", "K"),
    # SciBench worked solutions
    ("... What does the air in the room weigh when the air pressure is $1.0 \\mathrm{~atm}$ ?", None, "N"),
    ("... What is the constant angular acceleration during this decrease in angular speed?", None, "rad/s^2"),
    ("... Calculate its minimum  distances from the Sun.", None, "m"),
    ("... Find its predicted range of flight if $\\theta=55^{\\circ}$.", None, "m"),
    ("Calculate the time needed for a spacecraft to make a Hohmann transfer from Earth to Mars", None, "s"),
    ("Calculate the maximum height change in the ocean tides caused by the Moon.", None, "m"),
    ("... Using Equation (5.23), calculate $\\Delta S$ for this process.", None, "J/K"),
    ("Determine the standard molar entropy of $\\mathrm{Ne}$ under standard conditions.", None, "J/(mol*K)"),
    ("Determine the diffusion coefficient for Ar at $298 \\mathrm{~K}$ and a pressure of 1.00 atm.", None, "m^2/s"),
    ("... calculate $\\Delta G_f^{\\circ}$ for $\\mathrm{Fe}(g)$ at 400. K.", None, "J/mol"),
    ("Calculate $E^{\\circ}$ for the half-cell reaction $\\mathrm{Fe}^{3+}(a q)$.", None, "V"),
    ("... What is the probability of $I_2$ populating the $n=2$ level if the temperature is 298 K?", None,
     "dimensionless"),
    ("... What is the overall quantum yield for this photochemical process?", None, "dimensionless"),
    # a trailing decimal point before a unit does not end the asking sentence
    ("Assuming that it is constant, calculate $\\Delta G_f^{\\circ}$ for $\\mathrm{Fe}(g)$ at 400. K.", None,
     "J/mol"),
])
def test_target(text, unit, dims_of):
    t = extract_target(text)
    assert t.dims == unit_info(dims_of).dims, (text, t)
    if unit:
        assert unit_info(t.unit).dims == unit_info(unit).dims and math.isclose(
            unit_info(t.unit).scale, unit_info(unit).scale), (text, t)
        assert ("delta_" in t.unit) == ("delta_" in unit), (text, t)  # a change, or a reading


def test_unknown_target():
    assert not extract_target("Tell me a story.").known


def test_physics_extraction_accuracy():
    probs = generate_problems(300, seed=11)
    score = score_extraction([(p.text, p.gold_trace, p.answer_unit) for p in probs])
    assert score.n == 300
    assert score.complete >= 0.9 and score.complete_value_only >= score.complete
    assert score.target_dims_acc >= 0.9


def test_gsm8k_extraction_accuracy_value_level(data_dir):
    from pcr_ray.data.readers import iter_gsm8k

    probs = [p for p, _ in zip(iter_gsm8k("test", data_dir), range(300), strict=False) if p.gold_trace]
    score = score_extraction([(p.text, p.gold_trace, p.gold_trace["answer"][0]["unit"]) for p in probs])
    assert score.complete_value_only >= 0.9
    assert score.complete <= score.complete_unit_lenient <= score.complete_value_only


def test_matching_is_by_value_and_dimension():
    gold = Given("v", 20.0, "km/h")
    assert given_matches(gold, [Given("x", 20 / 3.6, "m/s")])
    assert not given_matches(gold, [Given("x", 20.0, "m")])
    assert given_matches(gold, [Given("x", 20.0, "m")], check_dims=False)
    trace = {"givens": [{"name": "a", "value": 1, "unit": "m"}, {"name": "b", "value": 2, "unit": "s"}],
             "steps": [{"op": "neg", "args": {"x": "a"}, "out": {"name": "c", "unit": "m"}}],
             "answer": [{"name": "c", "unit": "m"}]}
    assert [g.name for g in used_givens(trace)] == ["a"]


def test_given_kinds_and_capture_per_kind():
    assert [given_kind(u) for u in ("dimensionless", "%", "orange", "item", "USD", "cent", "USD/hour", "orange/sack",
                                    "m/s", "hour", "kg", "no such unit")] == \
        ["unitless", "unitless", "count", "count", "money", "money", "rate", "rate", "rate", "physical", "physical",
         "unitless"]
    # four used givens, one of each kind (the steps' own units are not scored): the count and the rate found, the
    # dollars' value found without their unit, the unitless 2 missed
    trace = {"givens": [{"name": "s", "value": 8, "unit": "sack"}, {"name": "r", "value": 35, "unit": "orange/sack"},
                        {"name": "p", "value": 3, "unit": "USD"}, {"name": "k", "value": 2, "unit": "dimensionless"}],
             "steps": [{"op": "mul", "args": {"x": "s", "y": "r"}, "out": {"name": "o", "unit": "orange"}},
                       {"op": "mul", "args": {"x": "o", "y": "p"}, "out": {"name": "c", "unit": "USD*orange"}},
                       {"op": "mul", "args": {"x": "c", "y": "k"}, "out": {"name": "d", "unit": "USD*orange"}}],
             "answer": [{"name": "d", "unit": "USD*orange"}]}

    class _Some:
        def extract(self, text: str) -> Extraction:
            return Extraction((Given("a", 8.0, "sack"), Given("b", 35.0, "orange/sack"), Given("c", 3.0, "item")),
                              Target(None, None, "none"))

    s = score_extraction([("text", trace, "USD*orange")], _Some())
    assert s.by_kind == {"count": {"givens": 1, "value": 1.0, "value_and_unit": 1.0},
                         "rate": {"givens": 1, "value": 1.0, "value_and_unit": 1.0},
                         "money": {"givens": 1, "value": 1.0, "value_and_unit": 0.0},
                         "unitless": {"givens": 1, "value": 0.0, "value_and_unit": 0.0}}
    assert s.complete == 0.0 and s.given_recall == 0.5


class _Constant:
    """A toy extractor: plugs in through the protocol without subclassing."""

    def extract(self, text: str) -> Extraction:
        return Extraction((Given("x", 1.0, "m"),), Target(None, unit_info("m").dims, "fixed"))


def test_extractor_protocol_is_pluggable():
    assert isinstance(RuleBasedExtractor(), GivensExtractor)
    assert isinstance(_Constant(), GivensExtractor)
    trace = {"givens": [{"name": "a", "value": 1, "unit": "m"}],
             "steps": [{"op": "neg", "args": {"x": "a"}, "out": {"name": "c", "unit": "m"}}],
             "answer": [{"name": "c", "unit": "m"}]}
    s = score_extraction([("anything", trace, "m")], _Constant())
    assert s.complete == 1.0 and s.target_dims_acc == 1.0
    assert extract("5 kg", _Constant()).givens[0].unit == "m"


def test_garbage_text_does_not_raise():
    for t in ["", "$$$", "\\frac{", "10^^^", "1/0 m", "x" * 5000, "$5 and $", "−−3 °C", "\x00\x01"]:
        e = extract(t)
        assert isinstance(e.givens, tuple)
