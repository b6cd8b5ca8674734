"""Word-problem counterfactuals: each kind makes the mistake it names, passes the verifier, and changes the value."""

from __future__ import annotations

import itertools

import pytest

from pcr_ray.core.trace import Answer, Given, Out, Step, Trace
from pcr_ray.core.verifier import verify
from pcr_ray.negatives.csp import CSPConfig, prepare_gold
from pcr_ray.negatives.pairs import PairConfig, pair_records
from pcr_ray.negatives.word import (
    DISTRACTOR,
    INVERSE_OPERATION,
    PART_FOR_WHOLE,
    STALE_INTERMEDIATE,
    WORD_KINDS,
    distractor_givens,
    word_counterfactuals,
)

APPLES = "Tom has 12 apples. He eats 3 apples on Monday. His sister has 7 apples. How many apples does Tom have left?"


def _pages() -> Trace:
    """GSM8K train's 'Julie is reading a 120-page book' gold trace (four steps)."""
    return Trace(
        (Given("n_pages", 12, "page"), Given("n_page", 120, "page")),
        (Step("mul", {"x": "n_pages", "y": 2}, Out("pages", "page")),
         Step("add", {"x": "n_pages", "y": "pages"}, Out("pages_2", "page")),
         Step("sub", {"x": "n_page", "y": "pages_2"}, Out("pages_3", "page")),
         Step("div", {"x": "pages_3", "y": 2}, Out("pages_4", "page"))),
        (Answer("pages_4", "page"),))


def _by_kind(trace: Trace, **kw) -> dict[str, list]:
    negs = word_counterfactuals(prepare_gold(trace), key="k", config=CSPConfig(max_per_kind=8), **kw)
    out: dict[str, list] = {k: [] for k in WORD_KINDS}
    for n in negs:
        out[n.kind].append(n)
    return out


def test_each_kind_makes_its_mistake():
    negs = _by_kind(_pages())
    inverse = {(n.t, n.step.op, tuple(n.step.args.values())) for n in negs[INVERSE_OPERATION]}
    assert (2, "sub", ("pages_2", "n_page")) in inverse  # the difference the wrong way round
    assert (0, "div", ("n_pages", 2)) in inverse  # 'twice' read as 'half'
    stale = {(n.t, tuple(n.step.args.values())) for n in negs[STALE_INTERMEDIATE]}
    assert (3, ("pages_2", 2)) in stale  # half of the pages read so far, not of the remaining ones
    assert (2, ("n_page", "pages")) not in stale  # a part of the sum pages_2: part_for_whole's, below
    part = {(n.t, tuple(n.step.args.values())) for n in negs[PART_FOR_WHOLE]}
    assert part == {(2, ("n_page", "n_pages")), (2, ("n_page", "pages"))}  # a part of the sum pages_2
    assert negs[DISTRACTOR] == []  # every given is used and no text was read


def test_every_negative_verifies_and_differs_downstream():
    gold = prepare_gold(_pages())
    for n in word_counterfactuals(gold, key="k", config=CSPConfig(max_per_kind=8)):
        v = verify(n.trace)
        assert v.ok, (n.kind, n.note)
        assert n.trace.steps[:n.t] == gold.trace.steps[:n.t]
        assert abs(n.neg_value - n.pos_value) > 1e-3 * max(abs(n.neg_value), abs(n.pos_value))
        for s, r in zip(n.trace.steps, v.steps, strict=True):  # later steps recomputed, not copied
            assert s.value == pytest.approx(r.value)


def test_the_verifier_rejects_a_rate_divided_the_wrong_way():
    """With counted units the inverse of 280 orange / 8 sack is sack/orange: no negative, the verifier's job."""
    trace = Trace((Given("n", 280, "orange"), Given("s", 8, "sack")),
                  (Step("div", {"x": "n", "y": "s"}, Out("r", "orange/sack")),), (Answer("r", "orange/sack"),))
    negs = _by_kind(trace)[INVERSE_OPERATION]
    assert [n.step.op for n in negs] == []  # div swapped is sack/orange; mul is orange*sack: both rejected
    plain = Trace((Given("n", 280), Given("s", 8)), (Step("div", {"x": "n", "y": "s"}, Out("r")),), (Answer("r"),))
    assert {(n.step.op, tuple(n.step.args.values())) for n in _by_kind(plain)[INVERSE_OPERATION]} == {
        ("div", ("s", "n")), ("mul", ("n", "s"))}


def test_a_distractor_comes_from_the_text():
    trace = Trace((Given("n_apples", 12, "apple"), Given("n_apples_2", 3, "apple")),
                  (Step("sub", {"x": "n_apples", "y": "n_apples_2"}, Out("left", "apple")),),
                  (Answer("left", "apple"),))
    extra = distractor_givens(APPLES, trace.givens, trace.steps)
    assert [(g.value, g.unit) for g in extra] == [(7.0, "apple")]  # the sister's apples; 12 and 3 are the gold's
    assert extra[0].name not in {g.name for g in trace.givens}
    negs = _by_kind(trace, distractors=extra)[DISTRACTOR]
    assert {tuple(n.step.args.values()) for n in negs} == {(extra[0].name, "n_apples_2"), ("n_apples", extra[0].name)}
    assert all(n.trace.givens[-1] == extra[0] for n in negs)
    # numbers the gold trace has as literals, percents or fractions of its numbers are no distractors
    assert distractor_givens("She pays 20% of $50 and then half of it.", (Given("c", 50, "USD"),),
                             (Step("mul", {"x": "c", "y": 0.2}, Out("p", "USD")),
                              Step("div", {"x": "p", "y": 2}, Out("h", "USD")))) == ()


def test_seeded_and_limited():
    gold = prepare_gold(_pages())
    a = word_counterfactuals(gold, key="k", config=CSPConfig(max_per_kind=1))
    assert a == word_counterfactuals(gold, key="k", config=CSPConfig(max_per_kind=1))
    for t, kind in itertools.product(range(4), WORD_KINDS):
        assert sum(1 for n in a if n.t == t and n.kind == kind) <= 1
    with pytest.raises(ValueError, match="unknown word-problem kind"):
        word_counterfactuals(gold, kinds=("swap",))


def test_pair_rows_carry_the_distractor_in_their_context():
    problem = {"id": "apples", "source": "gsm8k_train", "text": APPLES, "gold_trace": Trace(
        (Given("n_apples", 12, "apple"), Given("n_apples_2", 3, "apple")),
        (Step("sub", {"x": "n_apples", "y": "n_apples_2"}, Out("left", "apple")),),
        (Answer("left", "apple"),)).to_dict()}
    rows, status = pair_records(problem, PairConfig(kinds=(DISTRACTOR, INVERSE_OPERATION)))
    assert status == "ok"
    kinds = {r["kind"] for r in rows}
    assert kinds == {DISTRACTOR, INVERSE_OPERATION}
    for r in rows:
        assert ("n_apples_3=7 apple" in r["context"]) == (r["kind"] == DISTRACTOR)  # named as the extractor names
        if r["kind"] == DISTRACTOR:
            assert "n_apples_3" in r["neg_step"] and "n_apples_3" not in r["pos_step"]


def test_guarantees_on_gsm8k_traces(data_dir):
    """Over real GSM8K train traces with their texts: every kind occurs, and every negative verifies, keeps the
    prefix and differs from the gold step's value."""
    from pcr_ray.data.readers import iter_gsm8k

    counts = dict.fromkeys(WORD_KINDS, 0)
    for p in itertools.islice(iter_gsm8k("train", data_dir), 120):
        if not p.gold_trace:
            continue
        gold = prepare_gold(p.gold_trace)
        extra = distractor_givens(p.text, gold.trace.givens, gold.trace.steps)
        for n in word_counterfactuals(gold, key=p.id, distractors=extra):
            counts[n.kind] += 1
            assert verify(n.trace).ok, (p.id, n.kind, n.note)
            assert n.trace.steps[:n.t] == gold.trace.steps[:n.t]
            assert abs(n.neg_value - n.pos_value) > 1e-3 * max(abs(n.neg_value), abs(n.pos_value)), (p.id, n.note)
    assert all(c >= 10 for c in counts.values()), counts
