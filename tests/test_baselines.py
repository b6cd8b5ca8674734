"""Baselines: the sandbox contains hostile programs; pyexec and direct extract and report answers."""

from __future__ import annotations

import os
import uuid

import pytest

from pcr_ray.baselines import run_baseline
from pcr_ray.baselines.sandbox import SandboxLimits, run_program
from pcr_ray.core.answers import extract_answer, last_quantity
from pcr_ray.search import SearchProblem
from tests.sandbox_util import needs_bwrap

LIM = SandboxLimits(wall_s=4.0, cpu_s=2, memory_mb=256)
UNCONFINED = SandboxLimits(wall_s=4.0, cpu_s=2, memory_mb=256, sandbox="unconfined")
# Every guard below bwrap holds on its own: the hostile programs run confined and unconfined.
BOTH = [pytest.param(LIM, id="bwrap", marks=needs_bwrap),
        pytest.param(UNCONFINED, id="unconfined", marks=pytest.mark.filterwarnings("ignore::RuntimeWarning"))]


class ScriptedGenerator:
    """Returns the scripted texts in order, one per request (a stand-in model with known outputs)."""

    def __init__(self, texts):
        self.texts, self.requests = list(texts), []

    def propose(self, requests):
        out = []
        for r in requests:
            self.requests.append(r)
            out.append([self.texts.pop(0)])
        return out


@pytest.mark.parametrize("lim", BOTH)
def test_a_good_program_runs_and_its_answer_is_read(lim: SandboxLimits) -> None:
    r = run_program("import math\nd = 0.5 * 2 * 5 ** 2\nprint(d, 'm')", lim)
    assert r.ok and r.failure == "" and r.returncode == 0 and r.confined == (lim.sandbox == "bwrap")
    hit = last_quantity(r.stdout)
    assert hit.value == 25.0 and hit.unit == "m"


@pytest.mark.parametrize("name,code,failure", [
    ("hang", "while True:\n    pass", ("timeout", "cpu")),
    ("sleep", "import time\ntime.sleep(60)", "timeout"),
    ("fork", "import os\ntry:\n    os.fork()\nexcept Exception:\n    pass\nprint(1)", "blocked"),
    ("forkbomb", "import os\nwhile True:\n    os.fork()", "blocked"),
    ("subprocess", "import subprocess\nsubprocess.run(['true'])", "blocked"),
    ("system", "__import__('os').system('true')", "blocked"),
    ("memory", "x = []\nwhile True:\n    x.append(' ' * 10**7)", "memory"),
    ("socket", "import socket\nsocket.create_connection(('127.0.0.1', 9))", "blocked"),
    ("output", "while True:\n    print('x' * 1000)", "output_limit"),
])
@pytest.mark.parametrize("lim", BOTH)
def test_hostile_programs_are_stopped_or_contained(name: str, code: str, failure, lim: SandboxLimits) -> None:
    r = run_program(code, lim)
    assert not r.ok and r.failure in ((failure,) if isinstance(failure, str) else failure), (name, r)
    assert r.wall_s < lim.wall_s + 3.0


@pytest.mark.parametrize("lim", BOTH)
def test_writes_outside_the_working_directory_are_blocked(lim: SandboxLimits) -> None:
    target = f"/tmp/pcr_sandbox_escape_{uuid.uuid4().hex}.txt"
    r = run_program(f"open({target!r}, 'w').write('x')\nprint(1)", lim)
    assert r.failure == "blocked" and not os.path.exists(target)
    r = run_program(f"import os\nos.rename('x', {target!r})", lim)
    assert r.failure == "blocked" and not os.path.exists(target)
    inside = run_program("open('scratch.txt', 'w').write('7')\nprint(open('scratch.txt').read())", lim)
    assert inside.ok and inside.stdout.strip() == "7"


@pytest.mark.parametrize("lim", BOTH)
def test_network_is_unreachable_even_without_the_hook(lim: SandboxLimits) -> None:
    r = run_program("print('ok')", lim)
    if not r.isolated_net:
        pytest.skip("unshare -n is not available here (not root, or no user namespaces)")
    assert r.ok


def test_answer_extraction() -> None:
    assert extract_answer("so the distance is 25 m.\nanswer: 25 m").value == 25.0
    assert extract_answer("answer: 25 m").unit == "m"
    assert extract_answer(r"The total is \boxed{1,234.5}").value == 1234.5
    hit = extract_answer("He pays $18 in all.")
    assert hit.value == 18 and hit.unit == "USD"
    assert extract_answer("answer: 3/4").value == 0.75
    assert extract_answer("no numbers at all") is None


@needs_bwrap
def test_pyexec_counts_hostile_attempts_as_failures_and_retries_with_feedback() -> None:
    p = SearchProblem("car", "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?", (), "m", 25.0)
    gen = ScriptedGenerator(["```python\nimport os\nos.fork()\nprint(25)\n```",
                             "```python\nprint(0.5*2*5**2, 'm')\n```"])
    res = run_baseline("pyexec", [p], gen, {"timeout_s": 4, "cpu_s": 2, "max_attempts": 2})[0]
    assert res.answer_value == 25.0 and res.answer_unit == "m" and res.retries == 1
    assert res.reject_codes == {"blocked": 1} and res.n_proposed == 2
    assert gen.requests[1].mode == "python" and "blocked" in gen.requests[1].feedback[0]
    gen = ScriptedGenerator(["while True: pass", "print('no number')"])
    res = run_baseline("pyexec", [p], gen, {"timeout_s": 2, "cpu_s": 1, "max_attempts": 2})[0]
    assert res.answer_value is None and res.reject_codes.pop("no number printed") == 1
    assert res.reject_codes in ({"timeout": 1}, {"cpu": 1})  # wall clock or CPU limit, whichever comes first


def test_direct_baseline_extracts_the_answer() -> None:
    p = SearchProblem("q", "What is 6 times 7?", (), "", 42.0)
    res = run_baseline("direct", [p, p], ScriptedGenerator(["6 times 7.\nanswer: 42", "I am not sure."]), {})
    assert res[0].answer_value == 42.0 and res[0].stop_reason == "answered"
    assert res[1].answer_value is None and res[1].stop_reason == "no_answer"
    with pytest.raises(ValueError, match="unknown baseline"):
        run_baseline("oracle", [p], None)
