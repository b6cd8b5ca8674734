"""44 hand-written gold traces across the families verify, with the right values; the CLI agrees."""

from __future__ import annotations

import collections
import json
import subprocess
import sys

import pytest

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.verifier import verify
from tests.gold_traces import GOLD


def test_gold_set_is_broad():
    assert len(GOLD) >= 40
    fams = collections.Counter(REGISTRY[s["op"]].family for _, _, t, _ in GOLD for s in t["steps"])
    for fam in ("arithmetic", "finance", "algebra", "trigonometry", "exponential", "kinematics", "dynamics",
                "energy", "circuits", "thermodynamics", "waves_optics", "constants"):
        assert fams[fam] >= 1, fam


@pytest.mark.parametrize("pid,text,trace,expected", GOLD, ids=[g[0] for g in GOLD])
def test_gold_trace_verifies_with_value(pid, text, trace, expected):
    v = verify(trace)
    assert v.ok, f"{pid}: {text}\n{v.format_text()}"
    assert v.answer[0].value == pytest.approx(expected, rel=1e-6), v.format_text()


def test_cli_verify_json_on_gold(tmp_path):
    pid, _, trace, expected = GOLD[0]
    f = tmp_path / "t.json"
    f.write_text(json.dumps(trace))
    out = subprocess.run([sys.executable, "-m", "pcr_ray", "verify", str(f), "json=true"], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["ok"] is True and d["answer"][0]["value"] == pytest.approx(expected)
    assert [s["value"] for s in d["steps"]] == pytest.approx([13, 9, 18])


def test_cli_verify_rejects_with_one_line_per_problem(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOLD[1][2]))
    bad = tmp_path / "bad.json"
    bad.write_text('{"givens": [], "steps": [{"op": "add"}], "answer": []}')
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    out = subprocess.run([sys.executable, "-m", "pcr_ray", "verify", str(good), str(bad), str(broken),
                          str(tmp_path / "missing.json")], capture_output=True, text=True, check=False)
    assert out.returncode == 1
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 4, out.stdout
    assert "VALID" in lines[0] and "REJECTED" in lines[1] and "not valid JSON" in lines[2]
    assert "cannot read" in lines[3]
    assert "Traceback" not in out.stderr


def test_cli_verify_readable_text(tmp_path):
    f = tmp_path / "t.json"
    trace = json.loads(json.dumps(GOLD[0][2]))
    trace["steps"][2]["value"] = 20
    f.write_text(json.dumps(trace))
    out = subprocess.run([sys.executable, "-m", "pcr_ray", "verify", str(f)], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 1
    assert "left = sub(x=r1, y=baked) = 9 eggs" in out.stdout
    assert "REJECTED at step 2 [units/arithmetic_error]" in out.stdout
    assert "claimed 20 USD, but it computes to 18 USD" in out.stdout


def _all_suite_traces():
    from tests.test_verifier import BASE, ERROR_CASES, mutate_trace

    yield from (t for _, _, t, _ in GOLD)
    yield BASE
    for _, fn, _, _ in ERROR_CASES:
        yield mutate_trace(fn)


def test_incremental_agrees_with_whole_on_every_suite_trace():
    from pcr_ray.core.verifier import verify_incrementally

    n = 0
    for t in _all_suite_traces():
        a, b = verify(t), verify_incrementally(t)
        assert a.ok == b.ok and a.diagnostics == b.diagnostics, (a.format_text(), b.format_text())
        assert [(s.name, s.value, s.dims) for s in a.steps] == [(s.name, s.value, s.dims) for s in b.steps]
        assert [(x.name, x.value) for x in a.answer] == [(x.name, x.value) for x in b.answer]
        n += 1
    assert n >= 70
