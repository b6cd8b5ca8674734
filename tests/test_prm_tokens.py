"""PRM token counts: what the scorers say they encode, and how a search's batches attribute them to problems."""

from __future__ import annotations

from pcr_ray.search.scoring import ScoreBatch
from pcr_ray.search.usage import propose_counted, score_counted

CTX = "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go? | givens: v0=0 m/s; a=2 m/s^2; t=5 s"
STEPS = ("d1 = kin_displacement(v0=v0, a=a, t=t) = 25 [m]", "v1 = mul(x=a, y=t) = 10 [m/s]")


class LengthScorer:
    """Counts a pair's tokens as its step's characters (a stand-in with known counts)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def score_counted(self, pairs):
        self.asked += pairs
        return [0.5] * len(pairs), [len(s) for _, s in pairs]


def test_batches_charge_each_problem_for_the_pairs_it_sent_and_nothing_for_cache_hits() -> None:
    batch = ScoreBatch({})
    a = batch.add(0, ("c0", "xxx"))
    batch.add(0, ("c0", "xxx"))      # asked twice in one step: scored once
    batch.add(1, ("c1", "yyyyy"))
    _, acct = batch.run(LengthScorer())
    assert acct[0]["prm_tokens"] == 3 and acct[1]["prm_tokens"] == 5 and acct[0]["prm_calls"] == 1
    assert batch.tokens[a] == 3 and sum(batch.tokens) == 8
    again = ScoreBatch(batch.caches)  # the next step: the pair is in problem 0's cache
    again.add(0, ("c0", "xxx"))
    again.add(0, ("c0", "zz"))
    _, acct = again.run(LengthScorer())
    assert acct[0]["prm_tokens"] == 2 and acct[0]["cache_hits"] == 1


def test_backends_without_counts_report_zero() -> None:
    class Plain:
        def score(self, pairs):
            return [0.5] * len(pairs)

        def propose(self, requests):
            return [["x"] for _ in requests]

    assert score_counted(Plain(), [("c", "s")]) == ([0.5], [0])
    assert propose_counted(Plain(), ["r1", "r2"]) == ([["x"], ["x"]], [(0, 0), (0, 0)])


def test_a_pair_model_counts_its_whole_sequence_cut_at_max_length() -> None:
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from pcr_ray.prm.model import minilm_path
    from pcr_ray.prm.scorer import PRMScorer

    tok = AutoTokenizer.from_pretrained(str(minilm_path()))
    scorer = PRMScorer(SimpleNamespace(attention="pair"), tok, max_length=128)  # counting needs the tokenizer only
    counts = scorer.token_counts([(CTX, STEPS[0]), (CTX * 10, STEPS[1])])
    assert counts[0] == len(tok(CTX, STEPS[0])["input_ids"]) < 128
    assert counts[1] == 128, "a long context is cut as scoring cuts it"


def test_a_shared_context_model_counts_each_context_once() -> None:
    from tests.prm_helpers import small_prm_scorer

    scorer = small_prm_scorer(max_length=160)
    assert scorer.shared
    alone = [scorer.token_counts([(CTX, s)])[0] for s in STEPS]
    together = scorer.token_counts([(CTX, s) for s in STEPS])
    cand = len(scorer.tokenizer(STEPS[1], add_special_tokens=False)["input_ids"]) + 1  # its tokens and [SEP]
    assert together[1] == cand and together[0] == alone[0], "the context is charged to its first pair only"
    assert sum(together) == sum(alone) - (alone[1] - cand)
    other = scorer.token_counts([(CTX, STEPS[0]), (CTX + " Then it stops.", STEPS[1])])
    assert other[1] > cand, "another context is encoded too"
