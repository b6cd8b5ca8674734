"""CSP guarantees on hundreds of traces: verifier-valid negatives, a real change at t, dedup, seeded determinism;
and the random (type-blind) generator beside it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.trace import Answer, Given, Out, Step, Trace, load_trace
from pcr_ray.core.units import unit_info
from pcr_ray.core.verifier import verify
from pcr_ray.negatives.csp import (
    CSP_KINDS,
    PRINCIPLE_SWAP,
    RANDOM_ARG,
    RANDOM_NOISE,
    RANDOM_OP,
    VARIABLE_SUBSTITUTION,
    CSPConfig,
    CSPError,
    counterfactuals,
    prepare_gold,
    random_negatives,
    step_key,
)
from tests.trace_factory import random_trace

EXAMPLE = Path(__file__).resolve().parent.parent / "pcr_ray" / "examples" / "car_from_rest.json"
N_RANDOM = 300


@pytest.fixture(scope="module")
def random_traces() -> list[tuple[str, Trace]]:
    return [(f"rand/{i}", random_trace(i)) for i in range(N_RANDOM)]


@pytest.fixture(scope="module")
def gsm8k_traces(data_dir) -> list[tuple[str, Trace]]:
    from pcr_ray.data.readers import iter_gsm8k

    out = []
    for p in itertools.islice(iter_gsm8k("train", data_dir), 260):
        if p.gold_trace:
            out.append((p.id, p.gold_trace))
    assert len(out) > 200
    return out


@pytest.fixture(scope="module")
def physics_traces() -> list[tuple[str, Trace]]:
    physics = pytest.importorskip("pcr_ray.data.physics")
    probs = physics.generate_problems(n=200, seed=11)
    out = [(p.id, p.gold_trace) for p in probs if p.gold_trace]
    assert len(out) >= 150
    return out


def _check_guarantees(corpus: list[tuple[str, Trace]], cfg: CSPConfig) -> dict[str, int]:
    counts = {PRINCIPLE_SWAP: 0, VARIABLE_SUBSTITUTION: 0}
    for key, tr in corpus:
        gold = prepare_gold(tr)
        gold_verdict = verify(gold.trace)
        assert gold_verdict.ok
        negs = counterfactuals(gold, key=key, config=cfg)
        keys = set()
        for n in negs:
            counts[n.kind] += 1
            v = verify(n.trace)
            assert v.ok, (key, n.t, n.note, v.format_text())  # every J- passes the verifier
            assert n.verified
            assert n.trace.steps[: n.t] == gold.trace.steps[: n.t]  # same prefix
            assert n.trace.givens == gold.trace.givens and n.trace.answer == gold.trace.answer
            pos_b, neg_b = gold_verdict.steps[n.t].base, v.steps[n.t].base
            assert abs(pos_b - neg_b) > cfg.abs_tol + cfg.rel_tol * max(abs(pos_b), abs(neg_b)), (key, n.note)
            assert v.steps[n.t].dims == gold_verdict.steps[n.t].dims  # same output dimension
            assert n.step.out == gold.trace.steps[n.t].out
            assert step_key(n.step) != step_key(gold.trace.steps[n.t])  # no commutative no-op
            if n.kind == PRINCIPLE_SWAP:
                assert n.step.op != n.positive.op
            else:
                assert n.step.op == n.positive.op
                changed = [k for k in n.step.args if n.step.args[k] != n.positive.args[k]]
                assert len(changed) == 1
                new = n.step.args[changed[0]]
                old = n.positive.args[changed[0]]
                if n.step.op != "const":  # the substitute has the dimension of the argument it replaces
                    env = {g.name: unit_info(g.unit).dims for g in gold.trace.givens}
                    env.update({s.out.name: unit_info(s.out.unit).dims for s in gold.trace.steps[: n.t]})
                    assert isinstance(new, str) and new in env
                    assert env[new] == (env[old] if isinstance(old, str) else env[new])
            k = n.key()
            assert k not in keys  # deduplicated
            keys.add(k)
            # values after t were recomputed, not copied: each claimed value agrees with the verifier
            for s, r in zip(n.trace.steps, v.steps, strict=True):
                assert s.value is not None and abs(s.value - r.value) <= 1e-9 * max(1.0, abs(r.value))
    return counts


def test_guarantees_on_random_registry_traces(random_traces):
    counts = _check_guarantees(random_traces, CSPConfig())
    assert counts[PRINCIPLE_SWAP] > N_RANDOM and counts[VARIABLE_SUBSTITUTION] > N_RANDOM // 2


@pytest.mark.slow
def test_guarantees_on_gsm8k_traces(gsm8k_traces):
    counts = _check_guarantees(gsm8k_traces, CSPConfig())
    assert counts[PRINCIPLE_SWAP] > 200 and counts[VARIABLE_SUBSTITUTION] > 200


def test_guarantees_on_physics_traces(physics_traces):
    counts = _check_guarantees(physics_traces, CSPConfig())
    assert counts[PRINCIPLE_SWAP] > 100 and counts[VARIABLE_SUBSTITUTION] > 50


def test_example_trace_negatives_are_what_we_expect():
    tr, _ = load_trace(str(EXAMPLE))
    negs = counterfactuals(tr, key="car")
    assert negs, "the example has swappable steps"
    # step 1 is at2 = mul(at, t): substituting at -> v0 (same dimension m/s) is a variable substitution
    subs = [(n.t, n.step.args) for n in negs if n.kind == VARIABLE_SUBSTITUTION]
    assert (1, {"x": "v0", "y": "t"}) in subs
    assert all(n.step.op != "mul" for n in negs if n.kind == PRINCIPLE_SWAP)


def test_coincidental_equal_values_are_not_negatives():
    # a and b are equal, so substituting one for the other changes nothing: no negative may result from it
    g = (Given("a", 3.0, "m"), Given("b", 3.0, "m"), Given("t", 2.0, "s"))
    tr = Trace(g, (Step("div", {"x": "a", "y": "t"}, Out("v", "m/s")),), (Answer("v", "m/s"),))
    negs = counterfactuals(tr, key="coincide")
    assert all(n.step.args.get("x") != "b" for n in negs if n.kind == VARIABLE_SUBSTITUTION)
    for n in negs:
        assert abs(n.neg_value - 1.5) > 1e-3


def test_commutative_rewrites_are_not_negatives():
    g = (Given("p", 4.0, "USD"), Given("q", 7.0, "USD"), Given("n", 3.0))
    tr = Trace(g, (Step("add", {"x": "p", "y": "q"}, Out("s", "USD")),), (Answer("s", "USD"),))
    negs = counterfactuals(tr, key="comm", config=CSPConfig(max_per_kind=50))
    assert negs
    for n in negs:
        assert n.neg_value != pytest.approx(11.0)  # add(q, p), sum(p, q), ... are the same computation
        assert step_key(n.step) != ("add", ("p", "q"))


def test_seeded_and_order_independent(random_traces):
    sample = random_traces[:30]
    a = [counterfactuals(tr, key=k, config=CSPConfig(seed=3)) for k, tr in sample]
    b = [counterfactuals(tr, key=k, config=CSPConfig(seed=3)) for k, tr in reversed(sample)][::-1]
    assert a == b
    c = [counterfactuals(tr, key=k, config=CSPConfig(seed=4)) for k, tr in sample]
    assert [[n.step for n in x] for x in a] != [[n.step for n in x] for x in c]


def test_max_per_kind_and_kinds_respected(random_traces):
    for key, tr in random_traces[:40]:
        negs = counterfactuals(tr, key=key, config=CSPConfig(max_per_kind=1, kinds=(VARIABLE_SUBSTITUTION,)))
        assert all(n.kind == VARIABLE_SUBSTITUTION for n in negs)
        per_t: dict[int, int] = {}
        for n in negs:
            per_t[n.t] = per_t.get(n.t, 0) + 1
        assert all(v <= 1 for v in per_t.values())


def test_invalid_gold_is_a_clear_error():
    g = (Given("a", 3.0, "m"), Given("t", 2.0, "s"))
    bad = Trace(g, (Step("add", {"x": "a", "y": "t"}, Out("s", "m")),), (Answer("s", "m"),))
    with pytest.raises(CSPError, match="unit_mismatch"):
        counterfactuals(bad)
    with pytest.raises(CSPError, match="out of range"):
        counterfactuals(random_trace(1), t=99)
    with pytest.raises(CSPError, match="unknown perturbation kind"):
        CSPConfig(kinds=("nonsense",))
    with pytest.raises(CSPError, match="not a trace"):
        counterfactuals(json.dumps({"givens": 3}))


def test_random_generator_is_type_blind_and_often_rejected(random_traces):
    kinds: dict[tuple[str, bool], int] = {}
    for key, tr in random_traces[:150]:
        gold = prepare_gold(tr)
        for n in random_negatives(gold, key=key):
            assert n.verified == verify(n.trace).ok
            assert n.trace.steps[: n.t] == gold.trace.steps[: n.t]
            kinds[(n.kind, n.verified)] = kinds.get((n.kind, n.verified), 0) + 1
            if n.kind == RANDOM_NOISE:
                assert not n.verified and n.step.op == n.positive.op and n.step.value != n.positive.value
            if n.verified:  # a verified random negative must still be a different computation
                assert abs(n.neg_value - n.pos_value) > 1e-9
    rejected = sum(v for (k, ok), v in kinds.items() if not ok)
    total = sum(kinds.values())
    assert 0.5 < rejected / total < 1.0  # many, but not all, are caught by the verifier
    assert kinds.get((RANDOM_OP, False), 0) > 0 and kinds.get((RANDOM_ARG, False), 0) > 0
    assert kinds.get((RANDOM_ARG, True), 0) + kinds.get((RANDOM_OP, True), 0) > 0


def test_csp_kinds_cover_the_registry_families(random_traces):
    fams = set()
    for key, tr in random_traces[:60]:
        for n in counterfactuals(tr, key=key, config=CSPConfig(kinds=CSP_KINDS)):
            fams.add(REGISTRY[n.step.op].family)
    assert len(fams) >= 6
