"""Readers: counts equal the files', a sample of records field by field, and clear errors for missing data."""

from __future__ import annotations

import json
import math

import pytest

from pcr_ray.core.answers import last_boxed, parse_number
from pcr_ray.core.units import unit_info
from pcr_ray.data import DataMissingError, Problem, load_dataset
from pcr_ray.data.readers import clean_scibench_unit, iter_gsm8k


def _lines(path):
    with open(path, encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip())


def test_counts_equal_the_files(data_dir):
    assert len(list(iter_gsm8k("train", data_dir, traces=False))) == _lines(data_dir / "gsm8k/train.jsonl") == 7473
    assert len(list(iter_gsm8k("test", data_dir, traces=False))) == _lines(data_dir / "gsm8k/test.jsonl") == 1319
    assert len(load_dataset("math500", data_dir)) == 500
    assert len(load_dataset("math", data_dir)) == 5000
    expected = 0
    for f in sorted((data_dir / "scibench").glob("*.json")):
        with open(f, encoding="utf-8") as fh:
            expected += len(json.load(fh))
    sci = load_dataset("scibench", data_dir)
    assert len(sci) == expected > 0
    assert len({p.id for p in sci}) == len(sci)


def test_gsm8k_records(data_dir):
    p = next(iter_gsm8k("train", data_dir, traces=False))
    assert p.id == "gsm8k/train/0" and p.source == "gsm8k" and p.subject == "train"
    assert p.text.startswith("Natalia sold clips to 48 of her friends in April")
    assert p.answer == "72" and p.answer_value == 72.0 and p.answer_unit == "" and p.level is None
    assert p.gold_trace is None and p.gold_steps is None
    t = next(iter_gsm8k("test", data_dir))
    assert t.id == "gsm8k/test/0" and t.text.startswith("Janet’s ducks lay 16 eggs per day")
    assert t.answer == "18" and t.answer_value == 18.0
    assert t.gold_trace is not None and t.gold_steps == len(t.gold_trace["steps"]) == 3


def test_gsm8k_commas_in_final_answer(data_dir):
    # 'Carla ... #### 2,500' style answers lose their comma
    probs = [p for p in iter_gsm8k("train", data_dir, traces=False) if p.id == "gsm8k/train/5835"]
    assert probs[0].answer == "40000" and probs[0].answer_value == 40000.0


def test_math500_records(data_dir):
    p = load_dataset("math500", data_dir, limit=1)[0]
    assert p.id == "math500/test/precalculus/807.json" and p.source == "math500"
    assert p.answer == "\\left( 3, \\frac{\\pi}{2} \\right)" and p.answer_value is None
    assert p.level == 2 and p.subject == "Precalculus"
    assert p.text.startswith("Convert the point $(0,3)$ in rectangular coordinates")


def test_math_records_use_last_boxed(data_dir):
    ps = load_dataset("math", data_dir, limit=3)
    assert [p.answer for p in ps] == ["2", "10", "\\dfrac{9}{7}"]
    assert ps[0].level == 3 and ps[0].subject == "Algebra" and ps[0].id == "math/test/0"
    assert ps[2].level == 4 and math.isclose(ps[2].answer_value, 9 / 7)


def test_scibench_records_keep_units_as_written(data_dir):
    sci = {p.id: p for p in load_dataset("scibench", data_dir)}
    p = sci["scibench/class/Problem_3.40"]
    assert p.answer_value == -0.16 and p.answer_unit == "\\mathrm{~mm}" and p.subject == "class"
    assert p.text.startswith("An automobile with a mass of $1000 \\mathrm{~kg}$")
    q = sci["scibench/chemmc/1-18"]  # a scale factor in the unit: 3.52 x 10^-19 J
    assert q.answer_value == 3.52 and q.answer_unit == "10^{-19} \\mathrm{~J}"
    info = unit_info(q.answer_unit)
    assert math.isclose(info.to_base(q.answer_value), 3.52e-19)


def test_helpers():
    assert last_boxed("so $\\boxed{\\frac{1}{2}}$ and then \\boxed{x^{2}}.") == "x^{2}"
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed 5$") == "5"
    assert parse_number("1,000") == 1000.0 and parse_number("$12") == 12.0 and parse_number("−2") == -2.0
    assert parse_number("\\frac{9}{7}") == 9 / 7 and parse_number("50\\%") == 50.0
    assert parse_number("x+1") is None and parse_number("") is None
    assert clean_scibench_unit(" $\\mathrm{~m} / \\mathrm{s}$") == "\\mathrm{~m} / \\mathrm{s}"
    assert clean_scibench_unit("$\\$$") == "USD" and clean_scibench_unit("") == ""


def test_missing_data_says_what_and_where(tmp_path):
    with pytest.raises(DataMissingError) as ei:
        load_dataset("gsm8k_test", tmp_path)
    msg = str(ei.value)
    assert "gsm8k/test.jsonl" in msg and str(tmp_path) in msg and "PCR_RAY_DATA" in msg
    with pytest.raises(DataMissingError, match="scibench"):
        load_dataset("scibench", tmp_path)
    with pytest.raises(ValueError, match="unknown data set"):
        load_dataset("nope", tmp_path)


def test_problem_dict_roundtrip():
    trace = {"givens": [{"name": "a", "value": 2, "unit": "m"}], "steps": [], "answer": [{"name": "a", "unit": "m"}]}
    p = Problem("x/1", "physics", "t", "2", 2.0, "m", 3, "kinematics", trace, 0)
    row = p.to_dict()
    assert isinstance(row["gold_trace"], str) and json.loads(row["gold_trace"]) == trace
    assert Problem.from_dict(row) == p
    q = Problem.from_dict({"id": "y", "source": "math", "text": "t", "answer": "x", "answer_value": float("nan"),
                           "level": float("nan"), "gold_trace": None, "extra": 1})
    assert q.answer_value is None and q.level is None and q.gold_trace is None
    with pytest.raises(ValueError):
        Problem("", "s", "t", "a")
    with pytest.raises(ValueError):
        Problem("z", "s", "t", "a", float("inf"))


def test_empty_cache_and_data_variables_count_as_unset(monkeypatch, tmp_path) -> None:
    """`PCR_RAY_CACHE= make demo` must not turn the working directory into the cache."""
    from pcr_ray.paths import cache_dir, data_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("PCR_RAY_CACHE", "")
    monkeypatch.setenv("PCR_RAY_DATA", "")
    assert cache_dir() == (tmp_path / "home" / ".cache" / "pcr_ray").resolve()
    assert data_dir() == (tmp_path / "home" / ".local" / "share" / "pcr_ray" / "data").resolve()
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "c"))
    assert cache_dir() == (tmp_path / "c").resolve() and (tmp_path / "c").is_dir()
