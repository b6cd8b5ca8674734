"""Shared-context PRM: one context and several candidates per sequence under a block mask (pcr_ray.prm.shared).

A candidate's score must not depend on its pack-mates or their order, must equal the score of the sequence
`[CLS] context [SEP] candidate [SEP]` alone, training must run through the same packing, and the checkpoint must
say which kind it is so that the scorer packs it.
"""

from __future__ import annotations

import json
import math
import statistics

import pytest
import torch

from pcr_ray.prm.model import PRMMeta, build_model, load_checkpoint, save_checkpoint
from pcr_ray.prm.scorer import PRMScorer
from pcr_ray.prm.shared import collate_packs, make_packs, packed_logits
from pcr_ray.prm.train_loop import TrainConfig, train_local
from tests.prm_helpers import small_pairs, tiny_backbone

CTX = "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go? | givens: a=2 m/s^2; t=5 s; v0=0 m/s"
CANDS = ["d1 = kin_displacement(v0=v0, a=a, t=t) = 25 [m]", "v1 = kin_velocity(v0=v0, a=a, t=t) = 10 [m/s]",
         "d1 = mul(x=a, y=t) = 10 [m]", "answer: a [m/s^2]", "t1 = div(x=t, y=a) = 2.5 [s^2*m^-1]"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_backbone(tmp_path_factory.mktemp("tiny_sc") / "bert")


@pytest.fixture(scope="module")
def shared_model(tiny):
    model, tok = build_model(str(tiny), seed=1, dropout=0.0, attention="shared_context", candidate_length=24)
    return model.eval(), tok


def _packed(model, tok, pairs, pack_size=16, max_length=96):
    with torch.inference_mode():
        return packed_logits(model, tok, pairs, max_length=max_length, candidate_length=model.candidate_length,
                             pack_size=pack_size).tolist()


def test_candidate_score_independent_of_pack_mates_and_order(shared_model):
    model, tok = shared_model
    pairs = [(CTX, c) for c in CANDS]
    together = _packed(model, tok, pairs)
    alone = [_packed(model, tok, [p])[0] for p in pairs]
    shuffled = _packed(model, tok, pairs[::-1])[::-1]
    in_pairs = _packed(model, tok, pairs, pack_size=2)
    assert max(abs(a - b) for a, b in zip(together, alone, strict=True)) < 1e-5
    assert max(abs(a - b) for a, b in zip(together, shuffled, strict=True)) < 1e-5
    assert max(abs(a - b) for a, b in zip(together, in_pairs, strict=True)) < 1e-5
    assert len({round(v, 4) for v in together}) == len(CANDS)  # the scores do differ by candidate
    # another context's candidates in the same forward pass change nothing either
    other = [("Another problem | givens: m=3 kg", "F1 = weight(m=m, g=g) = 29.42 [N]")]
    mixed = _packed(model, tok, other + pairs)[1:]
    assert max(abs(a - b) for a, b in zip(together, mixed, strict=True)) < 1e-5


def test_packed_score_equals_one_masked_sequence_and_context_states_are_the_contexts_alone(shared_model):
    """A packed candidate scores as the single sequence `[CLS] ctx [SEP] cand [SEP]` under a hand-built block mask,
    and under that mask the context's hidden states are those of the context encoded alone (the installed
    transformers honours the 4D mask)."""
    model, tok = shared_model
    pairs = [(CTX, c) for c in CANDS]
    packed = _packed(model, tok, pairs)
    for (c, s), want in zip(pairs, packed, strict=True):
        ctx_ids = tok(c, add_special_tokens=False)["input_ids"]
        cand_ids = tok(s, add_special_tokens=False)["input_ids"][: model.candidate_length - 1]
        ids = [tok.cls_token_id, *ctx_ids[-(96 - model.candidate_length - 2):], tok.sep_token_id]
        n_ctx = len(ids)
        ids += [*cand_ids, tok.sep_token_id]
        n = len(ids)
        allowed = torch.zeros(n, n, dtype=torch.bool)
        allowed[:, :n_ctx] = True
        allowed[n_ctx:, n_ctx:] = True
        mask = torch.zeros(1, 1, n, n).masked_fill(~allowed, torch.finfo(torch.float32).min)
        x = torch.tensor([ids])
        with torch.inference_mode():
            hidden = model.encoder(input_ids=x, attention_mask=mask,
                                   token_type_ids=torch.tensor([[0] * n_ctx + [1] * (n - n_ctx)])).last_hidden_state
            alone = model.encoder(input_ids=x[:, :n_ctx], attention_mask=torch.ones(1, n_ctx, dtype=torch.long)
                                  ).last_hidden_state
            got = float(model.head(hidden[0, n_ctx:].mean(0)))
        assert abs(got - want) < 1e-5, (s, got, want)
        assert torch.allclose(hidden[0, :n_ctx], alone[0], atol=1e-5)
    batch = collate_packs(make_packs(tok, pairs[:2], max_length=96, candidate_length=model.candidate_length,
                                     pack_size=16))
    n_ctx = int((batch.token_type_ids[0] == 0).sum())
    n1 = int(batch.pool[0, 0].gt(0).sum())
    assert batch.position_ids[0, n_ctx + n1].item() == n_ctx  # the second candidate's positions restart
    assert float(batch.attention_mask[0, 0, n_ctx, n_ctx + n1]) < -1e30  # a candidate does not see the next


def test_candidate_and_context_budgets(shared_model):
    model, tok = shared_model
    long_ctx = " ".join(f"word{i}" for i in range(400)) + " | givens: x=1 m"
    long_cand = "d1 = add(" + ", ".join(f"x{i}=x" for i in range(60)) + ") [m]"
    (p,) = make_packs(tok, [(long_ctx, long_cand)], max_length=96, candidate_length=24, pack_size=4)
    assert len(p.context_ids) == 96 - 24 and len(p.candidate_ids[0]) == 24
    assert p.context_ids[-2] == tok(long_ctx, add_special_tokens=False)["input_ids"][-1]  # cut from the start
    with pytest.raises(ValueError, match="candidate_length"):
        make_packs(tok, [(CTX, CANDS[0])], max_length=96, candidate_length=94, pack_size=4)


def test_scorer_groups_candidates_by_context_into_packs(shared_model):
    model, tok = shared_model
    contexts = [CTX, CTX + " (second)", CTX + " (third)"]
    pairs = [(c, s) for s in CANDS for c in contexts]  # interleaved: grouping must find them
    seen: list[tuple[int, int]] = []
    hook = model.encoder.register_forward_hook(lambda m, a, kw, out: seen.append(tuple(kw["input_ids"].shape)),
                                               with_kwargs=True)
    try:
        sc = PRMScorer(model, tok, max_length=96, max_batch=64, pack_size=16, context_cache=False)
        scores = sc.score(pairs)
        assert seen and sum(b for b, _ in seen) == 3  # one pack per context, all in one pass
        seen.clear()
        small = PRMScorer(model, tok, max_length=96, max_batch=4, pack_size=2, context_cache=False).score(pairs)
        assert sum(b for b, _ in seen) == 9  # ceil(5 / 2) packs per context, passes of <= 4 candidates
        assert len(seen) > 1
    finally:
        hook.remove()
    assert max(abs(a - b) for a, b in zip(scores, small, strict=True)) < 1e-6
    # the context cache: each context's keys and values computed once, the same scores as the packs
    embedded: list[int] = []
    hook = model.encoder.embeddings.register_forward_hook(lambda m, a, kw, out: embedded.append(out.shape[0]),
                                                          with_kwargs=True)
    try:
        cached = PRMScorer(model, tok, max_length=96, max_batch=64)
        assert cached.context_cache
        fast = cached.score(pairs)
    finally:
        hook.remove()
    assert embedded == [3, 15]  # the 3 contexts once, then their 15 candidates
    assert max(abs(a - b) for a, b in zip(scores, fast, strict=True)) < 1e-5
    split = PRMScorer(model, tok, max_length=96, max_batch=7).score(pairs)  # a context per pass
    assert max(abs(a - b) for a, b in zip(fast, split, strict=True)) < 1e-5
    with pytest.raises(ValueError, match="int8 scoring is refused"):
        PRMScorer(model, tok, int8=True)


@pytest.mark.parametrize("loss", ["pairwise", "listwise"])
def test_shared_training_round_trips_attention_through_the_checkpoint(tiny, tmp_path, loss):
    rows = small_pairs(30)
    train = [r for r in rows if r["split"] != "test"][:40]
    val = [r for r in rows if r["split"] == "test"][:12] or rows[:12]
    cfg = {"backbone": str(tiny), "epochs": 1, "batch_size": 8, "max_length": 96, "lr": 1e-3, "seed": 0,
           "loss": loss, "progress": False, "attention": "shared_context", "candidate_length": 24, "max_batches": 3}
    m, path = train_local(train, val, tmp_path / loss, cfg)
    assert m["train_pairs"] > 0 and m["train_loss"] == m["train_loss"] and 0.0 <= m["val_pairwise_acc"] <= 1.0
    meta = json.loads((path / "prm.json").read_text())
    assert (meta["attention"], meta["candidate_length"]) == ("shared_context", 24)
    model, tok, rmeta = load_checkpoint(path)
    assert (model.attention, model.candidate_length, rmeta.attention) == ("shared_context", 24, "shared_context")
    init = build_model(str(tiny), seed=0, attention="shared_context", candidate_length=24)[0]
    assert any(not torch.equal(a, b) for a, b in zip(init.state_dict().values(), model.state_dict().values(),
                                                     strict=True))  # the masked steps trained the weights
    sc = PRMScorer.from_checkpoint(path)
    assert sc.shared and sc.identity["attention"] == "shared_context"
    pairs = [(r["context"], r["pos_step"]) for r in val]
    assert sc.score(pairs) == pytest.approx([PRMScorer.from_checkpoint(path).score([p])[0] for p in pairs], abs=1e-6)


def test_shared_int8_quantizes_each_token_alone_and_refuses_per_pass_int8(shared_model, tiny, tmp_path):
    """int8 for a shared-context PRM: one scale per token, so a score does not take its scale from the other
    candidates (here it is the same alone; on MiniLM fp32 rounding noise can flip a token's rounding, see
    docs/prm.md), close to fp32; torch's dynamic int8 (one scale per pass) is refused with a message that says why."""
    from torch.ao.quantization import quantize_dynamic

    from pcr_ray.prm.int8_rows import RowInt8Linear

    model, tok = shared_model
    path = save_checkpoint(model, tok, tmp_path / "sc", PRMMeta(backbone=str(tiny), attention="shared_context",
                                                               candidate_length=24, max_length=96, dropout=0.0))
    q8 = PRMScorer.from_checkpoint(path, int8=True, measure_kernel=False)  # int8 pinned: its properties tested
    assert q8.identity["kernel"]["kernel"] == "int8_rows" and q8.identity["int8"] is True
    assert any(isinstance(m, RowInt8Linear) for m in q8.model.modules())
    pairs = [(CTX, c) for c in CANDS] + [("Another problem | givens: m=3 kg", "F1 = weight(m=m, g=g) = 29.42 [N]")]
    together = q8.logits(pairs)
    alone = [q8.logits([p])[0] for p in pairs]
    assert max(abs(a - b) for a, b in zip(together, alone, strict=True)) < 1e-5
    fp32 = PRMScorer.from_checkpoint(path).logits(pairs)
    assert 0 < max(abs(a - b) for a, b in zip(together, fp32, strict=True)) < 0.05 * max(map(abs, fp32))
    with pytest.raises(ValueError, match="one activation scale per forward pass"):
        PRMScorer(quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8), tok, int8=True)


def test_pair_checkpoints_stay_pair_and_bad_attention_is_refused(tiny, tmp_path):
    model, tok = build_model(str(tiny), seed=0)
    path = save_checkpoint(model, tok, tmp_path / "ck", PRMMeta(backbone=str(tiny)))
    meta = json.loads((path / "prm.json").read_text())
    del meta["attention"], meta["candidate_length"]  # a checkpoint written before attention existed
    (path / "prm.json").write_text(json.dumps(meta))
    assert load_checkpoint(path)[0].attention == "pair" and not PRMScorer.from_checkpoint(path).shared
    with pytest.raises(ValueError, match="attention must be one of"):
        TrainConfig.from_dict({"attention": "sparse"})
    with pytest.raises(ValueError, match="attention must be one of"):
        PRMMeta(backbone="x", attention="sparse")


def test_quick_shared_checkpoint_lives_apart(tmp_path, monkeypatch):
    """Each recipe (attention, budget, ...), data and code version has a folder of its own, named by its key."""
    from pcr_ray.prm import checkpoints as ck

    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "cache"))
    shared, pair = ck.default_checkpoint_dir("csp", "shared_context"), ck.default_checkpoint_dir("csp", "pair")
    assert shared.parent == pair.parent == tmp_path / "cache" / "prm"
    assert shared.name.startswith("csp_shared-") and pair.name.startswith("csp-") and shared != pair
    assert ck.default_checkpoint_dir("csp") == shared  # shared context: the default
    assert ck.find_checkpoint("csp", "shared_context") is None
    small = ck.recipe_of("csp", "shared_context", budget_pairs=10)
    assert ck.default_checkpoint_dir("csp", "shared_context", small).name.startswith("csp_shared-")
    assert ck.default_checkpoint_dir("csp", "shared_context", small) != shared
    # the oldest versions of a name go, beyond KEEP_VERSIONS
    for i in range(5):
        (shared.parent / f"csp_shared-old{i}").mkdir(parents=True)
    (shared.parent / "csp-keepme").mkdir()
    (shared.parent / "csp_shared").mkdir()
    (shared.parent / "csp_shared" / "prm.json").write_text("{}")  # made before folders had keys
    shared.mkdir()
    ck.prune_old(shared)
    left = sorted(p.name for p in shared.parent.iterdir())
    assert len([n for n in left if n.startswith("csp_shared-")]) == ck.KEEP_VERSIONS and shared.name in left
    assert "csp-keepme" in left and "csp_shared" not in left


@pytest.mark.slow
def test_minilm_packed_scores_match_alone(tmp_path):
    """The real MiniLM weights: a candidate scored in a pack of the beam equals it scored alone (fp32)."""
    model, tok = build_model("minilm", seed=0, attention="shared_context")
    model.eval()
    pairs = [(CTX, c) for c in CANDS * 4]
    packed = _packed(model, tok, pairs, max_length=160)
    alone = [_packed(model, tok, [p], max_length=160)[0] for p in pairs[: len(CANDS)]]
    assert max(abs(a - b) for a, b in zip(packed, alone * 4, strict=True)) < 1e-5
    cached = PRMScorer(model, tok, max_length=160).logits(pairs)
    assert max(abs(a - b) for a, b in zip(packed, cached, strict=True)) < 1e-5
    from pcr_ray.prm.int8_rows import quantize_rows

    quantize_rows(model.encoder)
    q8 = PRMScorer(model, tok, max_length=160, int8=True).score(pairs)
    fp = [1 / (1 + math.exp(-v)) for v in cached]
    assert statistics.fmean(abs(a - b) for a, b in zip(q8, fp, strict=True)) < 0.01


def test_fused_query_key_value_equal_the_three_projections():
    """fuse_linears: one product for q, k and v; to the bit for per-token int8, to float rounding in fp32."""
    from torch import nn

    from pcr_ray.prm.int8_rows import RowInt8Linear, fuse_linears

    torch.manual_seed(0)
    lins = [nn.Linear(32, 32) for _ in range(3)]
    x = torch.randn(21, 32)
    fused = fuse_linears(lins)
    assert torch.allclose(fused(x), torch.cat([m(x) for m in lins], -1), atol=1e-6)
    rows = [RowInt8Linear(m) for m in lins]
    assert torch.equal(fuse_linears(rows)(x), torch.cat([m(x) for m in rows], -1))
    assert fuse_linears([lins[0], rows[1]]) is None and fuse_linears([nn.Linear(8, 4), nn.Linear(16, 4)]) is None


def test_shared_context_scoring_runs_under_bf16_close_to_fp32(shared_model):
    """bf16 autocast (the GPU default) through the context cache: the scores of fp32 to bf16's precision."""
    model, tok = shared_model
    pairs = [(CTX, c) for c in CANDS]
    fp32 = PRMScorer(model, tok, max_length=96).logits(pairs)
    b16 = PRMScorer(model, tok, max_length=96, bf16=True).logits(pairs)
    assert max(abs(a - b) for a, b in zip(fp32, b16, strict=True)) < 0.05 * max(1.0, max(map(abs, fp32)))
