"""The listwise loss: candidate lists assembled from pair rows, the loss itself, and a listwise training run."""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from pcr_ray.prm.scorer import PRMScorer
from pcr_ray.prm.train_loop import candidate_lists, list_logits, listwise_loss, train_local
from tests.prm_helpers import small_pairs, tiny_backbone


def _rows(n_lists: int, sizes: list[int]) -> list[dict[str, str]]:
    rows = []
    for g in range(n_lists):
        for j in range(sizes[g % len(sizes)]):
            rows.append({"context": f"problem {g} | steps: s{g}", "pos_step": f"gold {g}",
                         "neg_step": f"wrong {g}.{j}"})
    return rows


def _batches(rows, size):
    for i in range(0, len(rows), size):
        chunk = rows[i:i + size]
        yield {k: [r[k] for r in chunk] for k in ("context", "pos_step", "neg_step")}


def test_listwise_loss_is_the_softmax_cross_entropy_and_pairwise_for_one_negative():
    lp = torch.tensor([2.0, -1.0])
    ln = torch.tensor([1.0, 0.5, 3.0, -2.0])
    group = torch.tensor([0, 0, 0, 1])
    want0 = -F.log_softmax(torch.tensor([2.0, 1.0, 0.5, 3.0]), 0)[0]
    want1 = F.softplus(-(torch.tensor(-1.0) - torch.tensor(-2.0)))  # one negative: -log sigmoid(l+ - l-)
    got = listwise_loss(lp, ln, group)
    assert float(got) == pytest.approx(float((want0 + want1) / 2), rel=1e-6)
    # the loss falls as the positive's logit rises, for every list
    assert float(listwise_loss(lp + 1.0, ln, group)) < float(got)


def test_candidate_lists_keep_lists_whole_and_deduplicate():
    rows = _rows(12, [1, 3, 7, 20])
    rows += rows[:2]  # a duplicated pair must not count twice
    random.Random(0).shuffle(rows)
    batches = list(candidate_lists(_batches(rows, 5), batch_size=8, seed="0|0"))
    seen: dict[str, list[str]] = {}
    for b in batches:
        assert len(b["neg_step"]) <= 8 or len(set(zip(b["context"], b["pos_step"], strict=True))) == 1
        for _c, p, n in zip(b["context"], b["pos_step"], b["neg_step"], strict=True):
            assert n.startswith("wrong " + p.split()[1] + ".")  # a negative travels with its own list
            seen.setdefault(p, []).append(n)
    sizes = {p: len(v) for p, v in seen.items()}
    assert all(len(v) == len(set(v)) for v in seen.values())
    assert sizes == {f"gold {g}": [1, 3, 7, 20][g % 4] for g in range(12)}
    # a list longer than the batch is cut into chunks of at most batch_size negatives; no other list straddles
    for p in seen:
        holders = [i for i, b in enumerate(batches) if p in b["pos_step"]]
        assert len(holders) == math.ceil(sizes[p] / 8)
    # the order is seeded: the same seed, the same batches; another seed, another order
    again = list(candidate_lists(_batches(rows, 5), batch_size=8, seed="0|0"))
    other = list(candidate_lists(_batches(rows, 5), batch_size=8, seed="0|1"))
    assert again == batches and other != batches
    # with the LR schedule's step count the lists spread over that many batches, still whole
    pairs = sum(len(b["neg_step"]) for b in batches)
    for steps in (4, 9, 15):
        spread = list(candidate_lists(_batches(rows, 5), batch_size=8, seed="0|0", n_batches=steps))
        assert abs(len(spread) - steps) <= 1 and sum(len(b["neg_step"]) for b in spread) == pairs
        assert sorted(n for b in spread for n in b["neg_step"]) == sorted(n for b in batches for n in b["neg_step"])
        for p in seen:
            assert 1 <= sum(p in b["pos_step"] for b in spread) <= math.ceil(sizes[p] / 8)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_backbone(tmp_path_factory.mktemp("tiny_lw") / "bert")


def test_list_logits_scores_each_positive_once(tiny):
    from pcr_ray.prm.model import build_model

    model, tok = build_model(str(tiny), seed=0, dropout=0.0)
    model.eval()
    batch = next(_batches(_rows(2, [3]), 6))
    with torch.inference_mode():
        lp, ln, group = list_logits(model, tok, batch, 64, torch.device("cpu"))
    assert lp.shape == (2,) and ln.shape == (6,) and group.tolist() == [0, 0, 0, 1, 1, 1]
    sc = PRMScorer(model, tok, max_length=64)
    want = sc.logits([("problem 0 | steps: s0", "gold 0"), ("problem 0 | steps: s0", "wrong 0.1")])
    assert float(lp[0]) == pytest.approx(want[0], abs=1e-5) and float(ln[1]) == pytest.approx(want[1], abs=1e-5)


def test_listwise_training_ranks_positives_first_on_its_lists(tiny, tmp_path):
    rows = [r for r in small_pairs(40) if r["split"] != "test"][:64]
    lists: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        lists.setdefault((r["context"], r["pos_step"]), []).append(r["neg_step"])

    def first_rate(path):
        sc = PRMScorer.from_checkpoint(path, max_length=96)
        hits = 0
        for (c, p), negs in lists.items():
            s = sc.score([(c, p)] + [(c, n) for n in negs])
            hits += s[0] > max(s[1:])
        return hits / len(lists)

    cfg = {"backbone": str(tiny), "loss": "listwise", "batch_size": 8, "max_length": 96, "lr": 1e-3,
           "head_lr": 1e-2, "seed": 1, "progress": False, "dropout": 0.0, "freeze_embeddings": False}
    _, one_batch = train_local(rows, rows[:8], tmp_path / "u", {**cfg, "epochs": 1, "max_batches": 1})
    m, trained = train_local(rows, rows[:8], tmp_path / "t", {**cfg, "epochs": 10})
    assert m["train_pairs"] == len({(r["context"], r["pos_step"], r["neg_step"]) for r in rows})
    before, after = first_rate(one_batch), first_rate(trained)
    assert after >= 0.8 and after > before + 0.25, (before, after)  # measured: 0.52 -> 0.93
