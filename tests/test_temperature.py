"""Temperature readings vs changes: the verifier, the answer conversion and the typed enumerator keep them apart."""

from __future__ import annotations

import json

import pytest

from pcr_ray.core.temperature import CHANGE, READING, UNKNOWN, given_role, step_role
from pcr_ray.core.trace import Given, parse_trace
from pcr_ray.core.verifier import VerifierState, verify, verify_step
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.enumerate import EnumeratorGenerator

KETTLE_GIVENS = [{"name": "P", "value": 2.2, "unit": "kW"}, {"name": "m", "value": 1.3, "unit": "kg"},
                 {"name": "T1", "value": 10, "unit": "degC"}, {"name": "T2", "value": 100, "unit": "degC"}]


def _step(op, args, name, unit):
    return {"op": op, "args": args, "out": {"name": name, "unit": unit}}


def _kettle(delta_t: str, extra: list | None = None) -> dict:
    steps = [_step("const", {"name": "c_water"}, "c", "J/(kg*K)")] + (extra or []) + [
        _step("heat", {"m": "m", "c": "c", "delta_t": delta_t}, "Q", "J"),
        _step("div", {"x": "Q", "y": "P"}, "t", "minute")]
    return {"givens": KETTLE_GIVENS, "steps": steps, "answer": [{"name": "t", "unit": "minute"}]}


def test_roles_of_givens_follow_pint_offset_and_delta_units() -> None:
    assert given_role("degC") == given_role("°F") == READING
    assert given_role("delta_degC") == given_role("delta_degF") == CHANGE
    assert given_role("K") == UNKNOWN  # kelvin is both: the check stays out of it
    assert given_role("m/s") == given_role("delta_degC/s") == given_role("not a unit") == UNKNOWN


def test_heating_by_the_difference_verifies_and_by_a_reading_does_not() -> None:
    gold = verify(_kettle("dT", [_step("sub", {"x": "T2", "y": "T1"}, "dT", "K")]))
    assert gold.ok, gold.format_text()
    assert gold.answer[0].value == pytest.approx(1.3 * 4186 * 90 / 2200 / 60, rel=1e-3)
    wrong = verify(_kettle("T1"))
    assert not wrong.ok and wrong.diagnostics[0].code == "temperature_reading_as_change"
    assert wrong.diagnostics[0].step == 1 and "'T1'" in wrong.diagnostics[0].message \
        and "sub(" in wrong.diagnostics[0].message
    # the same numbers given in kelvin carry no role: a kelvin value may be a change, so nothing is flagged
    kelvin = _kettle("T1")
    kelvin["givens"] = [dict(g, unit="K", value=g["value"] + 273.15) if g["unit"] == "degC" else g
                        for g in KETTLE_GIVENS]
    assert verify(kelvin).ok
    # a change given as such (delta_degC) is accepted where a change belongs
    delta = _kettle("dT0")
    delta["givens"] = KETTLE_GIVENS + [{"name": "dT0", "value": 90, "unit": "delta_degC"}]
    assert verify(delta).ok


def test_a_change_in_an_offset_unit_converts_without_the_offset() -> None:
    t = {"givens": KETTLE_GIVENS, "steps": [_step("sub", {"x": "T2", "y": "T1"}, "dT", "degC")],
         "answer": [{"name": "dT", "unit": "delta_degF"}]}
    v = verify(t)
    assert v.ok, v.format_text()
    assert v.steps[0].value == pytest.approx(90)  # not 90 - 273.15
    assert v.answer[0].value == pytest.approx(162)  # a 90 K change is 162 delta_degF, not 162 - 459.67 + ...
    # asked in degF (a reading's unit), the change is refused rather than printed as '162 degF'
    t["answer"] = [{"name": "dT", "unit": "degF"}]
    assert [d.code for d in verify(t).diagnostics] == ["answer_temperature_role"]
    # a reading keeps its offset: T2 + (T2 - T1) = 190 degC
    t["steps"].append(_step("add", {"x": "T2", "y": "dT"}, "T3", "degC"))
    t["answer"] = [{"name": "T3", "unit": "degC"}]
    v = verify(t)
    assert v.ok and v.answer[0].value == pytest.approx(190)


@pytest.mark.parametrize("op,args,roles,want", [
    ("sub", {"x": "a", "y": "b"}, {"a": READING, "b": READING}, (CHANGE, "")),
    ("sub", {"x": "a", "y": "b"}, {"a": READING, "b": CHANGE}, (READING, "")),
    ("sub", {"x": "a", "y": "b"}, {"a": CHANGE, "b": READING}, (UNKNOWN, "temperature_reading_arithmetic")),
    ("add", {"x": "a", "y": "b"}, {"a": CHANGE, "b": CHANGE}, (CHANGE, "")),
    ("add", {"x": "a", "y": "b"}, {"a": READING, "b": CHANGE}, (READING, "")),
    ("add", {"x": "a", "y": "b"}, {"a": READING, "b": READING}, (UNKNOWN, "temperature_reading_arithmetic")),
    ("add", {"x": "a", "y": "b"}, {"a": READING}, (UNKNOWN, "")),  # b unknown: no claim
    ("sum", {"x1": "a", "x2": "b"}, {"a": READING, "b": READING}, (UNKNOWN, "temperature_reading_arithmetic")),
    ("mean", {"x1": "a", "x2": "b"}, {"a": READING, "b": READING}, (READING, "")),
    ("mean", {"x1": "a", "x2": "b"}, {"a": READING, "b": CHANGE}, (UNKNOWN, "")),
    ("temperature_change", {"q": "q", "m": "m", "c": "c"}, {}, (CHANGE, "")),
    ("ideal_gas_pressure", {"n": "n", "R": "R", "temp": "d", "vol": "v"}, {"d": CHANGE},
     (UNKNOWN, "temperature_change_as_reading")),
    ("linear_expansion", {"alpha": "al", "length": "L", "delta_t": "T"}, {"T": READING},
     (UNKNOWN, "temperature_reading_as_change")),
    ("mul", {"x": "a", "y": "b"}, {"a": READING, "b": READING}, (UNKNOWN, "")),  # not checked
])
def test_step_role_rules(op, args, roles, want) -> None:
    role, code, msg = step_role(op, args, lambda n: roles.get(n, UNKNOWN))
    assert (role, code) == want
    assert bool(msg) == bool(code)


def test_typed_enumerator_offers_heat_by_the_difference_only() -> None:
    givens = tuple(Given(g["name"], g["value"], g["unit"]) for g in KETTLE_GIVENS)
    trace, _ = parse_trace({"givens": KETTLE_GIVENS, "steps": [
        _step("const", {"name": "c_water"}, "c", "J/(kg*K)"), _step("sub", {"x": "T2", "y": "T1"}, "dT", "K")],
        "answer": [{"name": "dT", "unit": "K"}]})
    assert trace is not None
    state, _ = VerifierState.from_givens(givens)
    steps = []
    for st in trace.steps:  # fill the values, as the search does
        chk = verify_step(state, st)
        assert chk.ok
        steps.append(chk.result.step.__class__(st.op, st.args, st.out, chk.result.value))
        state = chk.state
    req = ProposalRequest("kettle", "A kettle heats water.", givens, tuple(steps), k=8, target_unit="minute")
    cands = [json.loads(c) for c in EnumeratorGenerator(cap=10_000).propose([req])[0]]
    heats = [c["args"]["delta_t"] for c in cands if c.get("op") == "heat"]
    assert heats == ["dT"]
    blind = [json.loads(c) for c in EnumeratorGenerator(typed=False, cap=100_000).propose([req])[0]]
    assert {"T1", "T2", "dT"} <= {c["args"]["delta_t"] for c in blind if c.get("op") == "heat"}
    assert not any(c.get("op") == "add" and {c["args"]["x"], c["args"]["y"]} == {"T1", "T2"} for c in cands)
