"""Grading: a table of numeric (units, tolerance, GSM8K normalisation) and MATH (math-verify) cases."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from pcr_ray import mathverify
from pcr_ray.core.answers import parse_quantity
from pcr_ray.data.problem import Problem
from pcr_ray.grading import SCIBENCH_REL_TOL, GradeResult, grade, grade_problem

NUMERIC: list[tuple[object, object, dict, bool]] = [
    # GSM8K-style normalisation, exact
    ("1,000", "1000", {"rel_tol": 0.0, "abs_tol": 1e-6}, True),
    ("$5", 5, {"rel_tol": 0.0, "abs_tol": 1e-6}, True),
    ("5.00", "5", {"rel_tol": 0.0, "abs_tol": 1e-6}, True),
    ("The answer is 18.", 18, {}, True),
    ("#### 1,250", 1250, {}, True),
    ("\\boxed{42}", 42, {}, True),
    ("18 eggs", 18, {}, True),
    ("18.5", 18, {"rel_tol": 0.0, "abs_tol": 1e-6}, False),
    ("-3", 3, {}, False),
    ("−3", -3, {}, True),
    (17, 18, {}, False),
    (18, "18", {}, True),
    # unit conversion: convertible is right
    ("25 km", 25000, {"unit": "m"}, True),
    ("90 km/h", 25, {"unit": "m/s"}, True),
    ("2.5 hours", 150, {"unit": "minute"}, True),
    ("1800 cents", 18, {"unit": "USD"}, True),
    ("18 dollars", 18, {"unit": "USD"}, True),
    ("0.5 kg", 500, {"unit": "g"}, True),
    ("3 kJ", 3000, {"unit": "J"}, True),
    ("300 K", 26.85, {"unit": "degC"}, True),
    # a temperature change: scales only, whichever side names it delta (a gold '58 °C' for 'by how much')
    (58, 58, {"unit": "degC", "pred_unit": "delta_degC"}, True),
    (10, 18, {"unit": "delta_degF", "pred_unit": "delta_degC"}, True),
    (10, 18, {"unit": "delta_degF", "pred_unit": "K"}, True),
    (58, 58 - 273.15, {"unit": "degC", "pred_unit": "delta_degC"}, False),
    ("1.6e-19 J", 1.6, {"unit": "10^{-19} J"}, True),
    ("1.6", 1.6, {"unit": "10^{-19} \\mathrm{~J}"}, True),
    ("-0.16 mm", -0.16, {"unit": "\\mathrm{~mm}"}, True),
    ("2 x 10^6", 2, {"unit": "10^6"}, True),
    (25, 25, {"unit": "m", "pred_unit": "m"}, True),
    (0.025, 25, {"unit": "m", "pred_unit": "km"}, True),
    (0.025, 25, {"unit": "m", "pred_unit": "m"}, False),
    # wrong dimension is wrong
    ("25 s", 25, {"unit": "m"}, False),
    ("10 N", 10, {"unit": "J"}, False),
    ("5 kg", 5, {"unit": "USD"}, False),
    # scientific notation and fractions
    ("3.0 x 10^8 m/s", 3e8, {"unit": "m/s"}, True),
    ("3e8", 3e8, {}, True),
    ("3.0 \\times 10^{8}", 3e8, {}, True),
    ("\\frac{1}{2}", 0.5, {}, True),
    ("$\\frac{3}{4}$", 0.75, {}, True),
    ("1/4", 0.25, {}, True),
    # SciBench 5% tolerance: edges
    ("1.049", 1.0, {"rel_tol": SCIBENCH_REL_TOL}, True),
    ("0.951", 1.0, {"rel_tol": SCIBENCH_REL_TOL}, True),
    ("1.051", 1.0, {"rel_tol": SCIBENCH_REL_TOL}, False),
    ("0.949", 1.0, {"rel_tol": SCIBENCH_REL_TOL}, False),
    ("-4.9", -5.0, {"rel_tol": SCIBENCH_REL_TOL}, True),
    ("0", 0.0, {"rel_tol": SCIBENCH_REL_TOL, "abs_tol": 1e-9}, True),
    # garbage never raises and is wrong
    ("asdf", 1, {}, False),
    ("", 1, {}, False),
    (None, 1, {}, False),
    (float("nan"), 1, {}, False),
    (float("inf"), 1, {}, False),
    ([1, 2], 1, {}, False),
    ({"x": 1}, 1, {}, False),
    (object(), 1, {}, False),
    (True, 1, {}, False),
    ("1" * 20000, 1, {}, False),
    ("5 ]]]{{{ zorgs^^", 5, {"unit": "m"}, True),  # a unit we cannot read is taken as the gold unit
    ("1/0", 1, {}, False),
    ("12", "not a number", {}, False),
]

MATH: list[tuple[object, object, bool]] = [
    ("\\frac{9}{7}", "\\dfrac{9}{7}", True),
    ("9/7", "\\frac{9}{7}", True),
    ("0.5", "\\frac12", True),
    ("x^2+2x+1", "(x+1)^2", True),
    ("2\\sqrt{2}", "\\sqrt{8}", True),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
    ("The answer is $\\boxed{10}$.", "10", True),
    ("1,000", "1000", True),
    ("3", "4", False),
    ("\\frac{1}{3}", "0.33", False),
    ("x+1", "x-1", False),
    ("garbage}{", "5", False),
    ("", "5", False),
    (None, "5", False),
    (12, "12", True),
    ("a" * 5000, "5", False),
]


@pytest.mark.parametrize("pred,gold,kw,expected", NUMERIC)
def test_numeric_table(pred, gold, kw, expected):
    res = grade(pred, gold, kind="numeric", **kw)
    assert isinstance(res, GradeResult) and res.reason
    assert res.correct is expected, (pred, gold, kw, res)


@pytest.mark.parametrize("pred,gold,expected", MATH)
def test_math_table(pred, gold, expected):
    res = grade(pred, gold, kind="math")
    assert res.correct is expected, (pred, gold, res)


def test_table_is_large_enough():
    assert len(NUMERIC) + len(MATH) >= 40


def test_wrong_dimension_reason_and_conversion_reason():
    r = grade("25 s", 25, unit="m")
    assert not r.correct and "dimension" in r.reason
    r = grade("25 km", 25000, unit="m")
    assert r.correct and "converted" in r.reason


def test_math_verify_inside_worker_threads():
    # signal-based timeouts only work in the main thread: grading must work in Ray/threadpool workers
    out: list[GradeResult] = []

    def work():
        out.append(grade("\\frac{1}{2}", "0.5", kind="math"))
        out.append(grade("x^2+2x+1", "(x+1)^2", kind="math"))
        out.append(grade("3", "4", kind="math"))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(out) == 9
    assert [r.correct for r in out].count(True) == 6
    assert not any("thread" in r.reason for r in out)


def test_time_is_bounded():
    t0 = time.perf_counter()
    r = grade("9" * 1999 + "^" + "9" * 1999, "1", kind="math", timeout_s=1.0)
    assert not r.correct
    assert time.perf_counter() - t0 < 5.0


def test_a_pathological_answer_kills_its_worker_and_grading_goes_on():
    """math-verify runs in a worker process: one that outlives the timeout on a tower of powers is killed (the
    process is gone, not left computing), and the next call gets a fresh worker and a right answer."""
    pool = mathverify.pool()
    assert grade("x^2+2x+1", "(x+1)^2", kind="math").correct  # a worker is up and idle
    before, killed = set(pool.pids()), pool.killed
    t0 = time.perf_counter()
    r = grade("2^{2^{2^{2^{2^{2}}}}}", "1", kind="math", timeout_s=1.0)
    assert not r.correct and r.reason == "math-verify timed out after 1s"
    assert time.perf_counter() - t0 < 5.0
    assert pool.killed == killed + 1
    gone = before - set(pool.pids())
    assert len(gone) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(gone.pop(), 0)
    assert grade("\\frac{1}{2}", "0.5", kind="math").reason == "math-verify: equivalent"
    assert not grade("x+1", "x-1", kind="math").correct
    assert pool.killed == killed + 1


def test_unknown_kind():
    assert not grade("1", "1", kind="fuzzy").correct


def test_grade_problem_uses_the_source_setting():
    sci = Problem("s", "scibench", "t", "1.0", 1.0, "\\mathrm{~kJ}")
    assert grade_problem("1.04 kJ", sci).correct
    assert grade_problem("1040 J", sci).correct
    assert not grade_problem("1.06 kJ", sci).correct
    assert not grade_problem("1.0 kg", sci).correct
    gsm = Problem("g", "gsm8k", "t", "18", 18.0)
    assert grade_problem("$18.00", gsm).correct and not grade_problem("18.01", gsm).correct
    mth = Problem("m", "math", "t", "\\frac{9}{7}")
    assert grade_problem("\\boxed{\\dfrac{9}{7}}", mth).correct
    phy = Problem("p", "physics", "t", "54", 54.0, "km/h")
    assert grade_problem("15 m/s", phy).correct and not grade_problem("15 m", phy).correct


def test_parse_quantity():
    assert parse_quantity("$1,000") == (1000.0, "USD")
    assert parse_quantity("3.0 x 10^8 m/s") == (3.0e8, "m/s")
    assert parse_quantity("The final answer is 7 apples.") == (7.0, "apples")
    assert parse_quantity("no digits") is None and parse_quantity(None) is None  # type: ignore[arg-type]


def test_scibench_own_grading_mode():
    """grading.mode=scibench: SciBench's equiv: 0.1 absolute when the book's number is >= 1, 10% relative below,
    in the stated unit (its 10^k included); other sources keep their setting."""
    from types import SimpleNamespace

    import pytest

    from pcr_ray.grading import grade_problem

    big = SimpleNamespace(source="scibench", answer="12.5", answer_value=12.5, answer_unit="m/s")
    small = SimpleNamespace(source="scibench", answer="0.5", answer_value=0.5, answer_unit="J")
    scaled = SimpleNamespace(source="scibench", answer="3.2", answer_value=3.2, answer_unit="10^4 N/C")
    assert grade_problem(12.59, big, pred_unit="m/s", mode="scibench").correct  # 0.09 off: in SciBench's rule
    assert grade_problem(12.59, big, pred_unit="m/s").correct  # and in the default 5%
    assert not grade_problem(12.7, big, pred_unit="m/s", mode="scibench").correct  # 0.2 off
    assert grade_problem(13.0, big, pred_unit="m/s").correct  # 4% off: in the default 5%
    assert not grade_problem(13.0, big, pred_unit="m/s", mode="scibench").correct
    assert grade_problem(0.54, small, pred_unit="J", mode="scibench").correct  # 8% below 1
    assert not grade_problem(0.56, small, pred_unit="J", mode="scibench").correct
    assert grade_problem(3.29e4, scaled, pred_unit="N/C", mode="scibench").correct  # 0.09 x 10^4 off
    assert not grade_problem(3.35e4, scaled, pred_unit="N/C", mode="scibench").correct
    assert grade_problem(45.03, big, pred_unit="km/h", mode="scibench").correct  # converted into the stated unit
    gsm = SimpleNamespace(source="gsm8k", answer="36", answer_value=36.0, answer_unit="")
    assert not grade_problem(36.05, gsm, mode="scibench").correct  # GSM8K stays exact
    with pytest.raises(ValueError, match="grading.mode must be one of"):
        grade_problem(1.0, big, mode="loose")


def test_one_module_reads_answers_in_text() -> None:
    """The data readers, grading and the baselines read answers with pcr_ray.core.answers; one boxed reader
    for all, which follows braces to any depth."""
    import importlib

    from pcr_ray import grading
    from pcr_ray.baselines import direct, pyexec
    from pcr_ray.core import answers
    from pcr_ray.data import files, readers

    assert grading.parse_quantity is answers.parse_quantity and files.parse_quantity is answers.parse_quantity
    assert readers.last_boxed is answers.last_boxed is files.last_boxed
    assert readers.parse_number is answers.parse_number
    assert direct.extract_answer is answers.extract_answer and pyexec.last_quantity is answers.last_quantity
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pcr_ray.baselines.answers")
    text = "so \\boxed{m = {{12}} \\mathrm{kg}} and then 99 more words"
    hit = answers.extract_answer(text)
    assert hit is not None and hit.value == 12.0
    assert answers.parse_quantity("the result: \\fbox{12 kg}.") == (12.0, "kg")


def test_a_worker_waiting_for_a_core_is_not_killed_for_waiting():
    """The timeout counts the worker's CPU time: a worker held off the CPU (SIGSTOP, as a loaded machine would)
    past its timeout still answers once it runs; one held past WALL_FACTOR times the timeout is killed."""
    pool = mathverify.MathVerifyPool(size=1)
    try:
        assert pool.check("1+1", "2", 10.0).equal
        (pid,) = pool.pids()
        os.kill(pid, signal.SIGSTOP)
        out: list[mathverify.Verdict] = []
        t = threading.Thread(target=lambda: out.append(pool.check("x^2+2x+1", "(x+1)^2", 1.0)))
        t.start()
        time.sleep(1.5)  # past the 1 s timeout in wall time, no CPU used
        os.kill(pid, signal.SIGCONT)
        t.join(30)
        assert out == [mathverify.Verdict(equal=True)] and pool.killed == 0

        (pid,) = pool.pids()
        os.kill(pid, signal.SIGSTOP)
        t0 = time.perf_counter()
        assert pool.check("3", "4", 0.3) == mathverify.Verdict(timed_out=True)
        assert 0.3 * mathverify.WALL_FACTOR <= time.perf_counter() - t0 < 5.0 and pool.killed == 1
    finally:
        pool.close()
