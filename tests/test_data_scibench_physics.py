"""SciBench's physics textbooks (fund, class, thermo) as a data set: the reader, units, givens and targets."""

from __future__ import annotations

import pytest

from pcr_ray.core.units import try_unit_info
from pcr_ray.data.givens import extract
from pcr_ray.data.readers import SCIBENCH_PHYSICS, DataMissingError, clean_scibench_unit, load_dataset


@pytest.fixture(scope="module")
def physics(data_dir):
    return load_dataset("scibench", data_dir, books=list(SCIBENCH_PHYSICS))


def test_the_three_books_and_nothing_else(physics, data_dir):
    assert len(physics) == 193
    assert {p.subject for p in physics} == set(SCIBENCH_PHYSICS)
    assert {p.id.split("/")[1] for p in physics} == set(SCIBENCH_PHYSICS)
    assert all(p.source == "scibench" and p.answer_value is not None for p in physics)  # 5% tolerance grading
    assert len({p.id for p in physics}) == len(physics)
    assert len(load_dataset("scibench", data_dir, books=["fund_sol"])) == 10


def test_an_unknown_book_is_a_clear_error(data_dir):
    with pytest.raises(DataMissingError, match="nosuchbook.json"):
        load_dataset("scibench", data_dir, books=["nosuchbook"])


def test_every_answer_unit_parses(physics):
    bad = [(p.id, p.answer_unit) for p in physics if try_unit_info(p.answer_unit or "dimensionless") is None]
    assert not bad


def test_bare_powers_of_ten_and_unit_vectors_become_units():
    assert clean_scibench_unit(" $10^{42}$") == "10^42 dimensionless"
    assert try_unit_info(clean_scibench_unit("$10^6$")).scale == 1e6
    assert clean_scibench_unit(" $\\mathrm{~N} \\hat{\\mathrm{i}}$") == "\\mathrm{~N}"
    assert clean_scibench_unit("$10^4 \\mathrm{~N} / \\mathrm{C}$") == "10^4 \\mathrm{~N} / \\mathrm{C}"


def test_givens_are_extracted_from_nearly_every_problem_and_targets_mostly_right(physics):
    ex = [(p, extract(p.text)) for p in physics]
    with_givens = sum(bool(e.givens) for _, e in ex)
    known = [(p, e) for p, e in ex if e.target.known]
    right = sum(e.target.dims == try_unit_info(p.answer_unit or "dimensionless").dims for p, e in known)
    assert with_givens >= 185  # 189 of 193 when written
    assert len(known) >= 145 and right >= 104  # 153 known, 109 of them of the answer's dimension when written


def test_textbook_phrasings_the_extractor_reads():
    e = extract("Two particles, each with a charge of magnitude $12 \\mathrm{nC}$, are at two of the vertices of "
                "an equilateral triangle with edge length $2.0 \\mathrm{~m}$. What is the magnitude of the electric "
                "field at the third vertex if both charges are positive?")
    assert e.target.dims == try_unit_info("N/C").dims
    e = extract("A deuteron with speed $14.9$ km / s collides elastically with a neutron at rest. If the deuteron "
                "is scattered through a LAB angle $\\psi = 10^\\circ$, what is the final speed of the neutron?")
    assert e.target.dims == try_unit_info("m/s").dims
    e = extract("How many megacoulombs of positive charge are in $1.00 \\mathrm{~mol}$ of hydrogen gas?")
    assert e.target.unit == "MC"
    e = extract("Calculate the boiling point of water where the barometric pressure is 253 Torr.")
    assert [g.unit for g in e.givens] == ["Torr"] and e.target.dims == try_unit_info("K").dims
