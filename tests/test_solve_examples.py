"""The README's `pcr-ray solve` examples: each states its answer (`pcr-ray solve "TEXT"  # answer: VALUE UNIT`), and
every one is a problem of benchmarks/bench_solve.py, which measures whether solve's defaults answer it (an accuracy,
a benchmark's figure, not a test's); solve's command line refuses an override in the problem text's place."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from pcr_ray.solve import main

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


def test_the_readme_states_solve_examples_with_answers_the_benchmark_measures() -> None:
    assert len(EXAMPLES) >= 2, EXAMPLES
    bench = (README.parent / "benchmarks" / "bench_solve.py").read_text()
    for text, value, unit in EXAMPLES:
        assert f'("{text}", {value!r}, "{unit}")' in bench, (text, value, unit)


def test_solve_cli_refuses_an_override_as_the_problem_text(capsys) -> None:
    assert main(["search.beam_width=2"]) == 2
    assert "the first argument is the problem text" in capsys.readouterr().err
