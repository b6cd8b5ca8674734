"""The README's `pcr-ray solve` examples give the answers the README says, with solve's defaults and the quick PRM
the project trains for itself (each README line `pcr-ray solve "TEXT"  # answer: VALUE UNIT`)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pcr_ray.solve import compose, main, solve

README = Path(__file__).resolve().parent.parent / "README.md"
ANSWER = re.compile(r"#\s*answer:\s*([-+0-9.eE]+)\s*(\S*)\s*$")


def readme_examples() -> list[tuple[str, float, str]]:
    """(problem text, answer value, answer unit) of each README solve line that states its answer."""
    out = []
    for line in README.read_text().splitlines():
        m = ANSWER.search(line)
        if not m or "pcr-ray solve" not in line:
            continue
        words = shlex.split(line, comments=True)
        if m and len(words) >= 3 and words[0].endswith("pcr-ray") and words[1] == "solve":
            out.append((words[2], float(m.group(1)), m.group(2)))
    return out


EXAMPLES = readme_examples()


def test_the_readme_states_solve_examples_with_answers() -> None:
    assert len(EXAMPLES) >= 2, EXAMPLES


@pytest.fixture(scope="module")
def scorer():
    from pcr_ray.solve import load_scorer

    return load_scorer(compose()["prm"])


@pytest.mark.slow
@pytest.mark.quick_prm
@pytest.mark.parametrize(("text", "value", "unit"), EXAMPLES, ids=[t[:40] for t, _, _ in EXAMPLES])
def test_readme_solve_example_is_answered_correctly(scorer, text: str, value: float, unit: str) -> None:
    res, report = solve(text, compose(), scorer=scorer)
    assert res.answer_value is not None, report
    assert res.answer_value == pytest.approx(value, rel=0.01), report
    assert res.answer_unit == unit, report
    assert res.trace_ok, report
    assert report.splitlines()[-1].startswith("answer: "), report


def test_solve_cli_refuses_an_override_as_the_problem_text(capsys) -> None:
    assert main(["search.beam_width=2"]) == 2
    assert "the first argument is the problem text" in capsys.readouterr().err
