"""The cross-encoder, its checkpoint folders and the batched scorer (real MiniLM weights; tiny DeBERTa-v2)."""

from __future__ import annotations

import math

import pytest
import torch

from pcr_ray.prm.base import sigmoid
from pcr_ray.prm.model import (
    CheckpointError,
    PRMMeta,
    build_model,
    encode_pairs,
    load_checkpoint,
    minilm_path,
    model_inputs,
    read_meta,
    resolve_backbone,
    save_checkpoint,
)
from pcr_ray.prm.scorer import PRMScorer
from pcr_ray.prm.train_loop import TrainConfig, pair_loss

PAIRS = [
    ("A car starts from rest and accelerates at 2 m/s^2 for 5 s. | givens: v0=0 m/s; a=2 m/s^2; t=5 s",
     "d = kin_displacement(v0=v0, a=a, t=t) = 25 [m]"),
    ("A car starts from rest and accelerates at 2 m/s^2 for 5 s. | givens: v0=0 m/s; a=2 m/s^2; t=5 s",
     "d = kin_displacement(v0=a, a=a, t=t) = 35 [m]"),
    ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. | givens: n=48",
     "clips = div(x=n, y=2) = 24"),
    ("short", "x = add(x=a, y=b) = 3"),
    ("Weng earns $12 an hour for babysitting. Yesterday she did 50 minutes. " * 12, "r = div(x=w, y=60) = 0.2"),
]


@pytest.fixture(scope="module")
def minilm_checkpoint(tmp_path_factory):
    model, tok = build_model("minilm", seed=0)
    return save_checkpoint(model, tok, tmp_path_factory.mktemp("ck") / "prm", PRMMeta(backbone="minilm", kind="csp"))


def test_minilm_backbone_is_the_packaged_folder():
    assert (minilm_path() / "model.safetensors").exists()
    assert resolve_backbone("minilm") == str(minilm_path()) == resolve_backbone(None)
    assert resolve_backbone("microsoft/deberta-v3-base") == "microsoft/deberta-v3-base"


def test_deberta_v2_architecture_trains_and_round_trips(tmp_path):
    from transformers import DebertaV2Config

    cfg = DebertaV2Config(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=256, type_vocab_size=0)
    model, tok = build_model(config=cfg, tokenizer_path="minilm", dropout=0.0, seed=1)
    assert type(model.encoder).__name__ == "DebertaV2Model"
    ctx, steps = [p[0] for p in PAIRS[:2]], [p[1] for p in PAIRS[:2]]
    enc = encode_pairs(tok, ctx + ctx, steps + steps[::-1], max_length=64)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):  # the pairwise loss goes down on a fixed batch: gradients flow through this architecture
        logits = model(**model_inputs(model, enc))
        loss = pair_loss(logits[:2], logits[2:], "pairwise")
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]
    path = save_checkpoint(model, tok, tmp_path / "deberta", PRMMeta(backbone="tiny-deberta", kind="random"))
    direct = PRMScorer(model, tok, max_length=64).score(PAIRS)
    loaded = PRMScorer.from_checkpoint(path, max_length=64)
    assert loaded.score(PAIRS) == direct  # exact round trip
    assert loaded.identity["kind"] == "random" and loaded.identity["backbone"] == "tiny-deberta"


def test_scorer_batches_by_length_and_keeps_input_order(minilm_checkpoint):
    sc = PRMScorer.from_checkpoint(minilm_checkpoint, max_batch=2)
    one = PRMScorer.from_checkpoint(minilm_checkpoint, max_batch=1)
    a = sc.score(PAIRS)
    assert all(0.0 <= x <= 1.0 and math.isfinite(x) for x in a)
    assert a == pytest.approx(one.score(PAIRS), abs=1e-5)  # batching (padding) does not change a score
    assert sc.score(PAIRS[::-1]) == pytest.approx(a[::-1], abs=1e-5)
    assert sc.score([]) == []
    assert len(set(round(x, 6) for x in a)) > 1
    assert sc.identity["checkpoint"] == str(minilm_checkpoint.resolve())
    assert sc.identity["int8"] is False and sc.pairs_scored == 2 * len(PAIRS)
    assert [sigmoid(v) for v in sc.logits(PAIRS)] == pytest.approx(a, abs=1e-12)


def test_scorer_scores_at_the_checkpoints_trained_length_unless_told(minilm_checkpoint):
    meta = read_meta(minilm_checkpoint)
    default = PRMScorer.from_checkpoint(minilm_checkpoint)
    assert default.max_length == meta.max_length == default.identity["max_length"] == 192
    short = PRMScorer.from_checkpoint(minilm_checkpoint, max_length=48)
    assert short.max_length == short.identity["max_length"] == 48
    long_pair = [PAIRS[4]]  # ~200 tokens: cut at 48, (nearly) whole at 192
    assert default.score(long_pair) == PRMScorer.from_checkpoint(minilm_checkpoint, max_length=192).score(long_pair)
    assert default.score(long_pair) != short.score(long_pair)


def test_bf16_scorer_runs_batched_under_autocast_close_to_fp32(minilm_checkpoint):
    fp32 = PRMScorer.from_checkpoint(minilm_checkpoint)
    b16 = PRMScorer.from_checkpoint(minilm_checkpoint, bf16=True)
    assert b16.identity["bf16"] is True and fp32.identity["bf16"] is False
    assert b16.pass_size == b16.max_batch  # batched like fp32
    ref, got = fp32.logits(PAIRS), b16.logits(PAIRS)
    assert got != ref  # bfloat16 arithmetic ran
    assert max(abs(a - b) for a, b in zip(got, ref, strict=True)) < 0.1, (got, ref)
    assert all(p.dtype == torch.float32 for p in b16.model.parameters())  # weights stay fp32
    with pytest.raises(ValueError, match="not both"):
        PRMScorer.from_checkpoint(minilm_checkpoint, int8=True, bf16=True)


def test_checkpoint_folder_shape_and_errors(minilm_checkpoint, tmp_path):
    meta = read_meta(minilm_checkpoint)
    assert meta.backbone == "minilm" and meta.kind == "csp"
    model, _, _ = load_checkpoint(minilm_checkpoint)
    assert not model.training
    with pytest.raises(CheckpointError, match="not a PRM checkpoint"):
        PRMScorer.from_checkpoint(tmp_path)
    sc = PRMScorer.from_checkpoint(minilm_checkpoint)
    with pytest.raises(TypeError, match="pair 0"):
        sc.score(["just a string"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="contexts"):
        encode_pairs(sc.tokenizer, ["a"], ["b", "c"])


def test_losses_and_config_validation():
    lp, ln = torch.tensor([2.0, -1.0]), torch.tensor([0.5, 1.0])
    expect = -torch.log(torch.sigmoid(lp - ln)).mean()
    assert float(pair_loss(lp, ln, "pairwise")) == pytest.approx(float(expect), rel=1e-6)
    bce = -(torch.log(torch.sigmoid(lp)).sum() + torch.log(1 - torch.sigmoid(ln)).sum()) / 4
    assert float(pair_loss(lp, ln, "pointwise")) == pytest.approx(float(bce), rel=1e-5)
    with pytest.raises(ValueError, match="loss"):
        TrainConfig(loss="hinge")
    with pytest.raises(ValueError, match="unknown training option"):
        TrainConfig.from_dict({"epochz": 3})


def test_average_checkpoints_is_the_parameter_mean(minilm_checkpoint, tmp_path):
    from pcr_ray.cli import main as cli_main
    from pcr_ray.prm.average import average_checkpoints

    a, _, _ = load_checkpoint(minilm_checkpoint)
    model_b, tok = build_model("minilm", seed=5)  # another head
    with torch.no_grad():
        model_b.encoder.embeddings.word_embeddings.weight.mul_(1.5)  # and another encoder
    b_path = save_checkpoint(model_b, tok, tmp_path / "b", PRMMeta(backbone="minilm", kind="csp"))
    out = average_checkpoints([minilm_checkpoint, b_path], tmp_path / "soup")
    soup, _, meta = load_checkpoint(out)
    sa, sb, ss = a.state_dict(), model_b.state_dict(), soup.state_dict()
    name = "encoder.embeddings.word_embeddings.weight"
    assert torch.allclose(ss[name], 1.25 * sa[name], atol=1e-6)
    assert torch.allclose(ss["head.weight"], (sa["head.weight"] + sb["head.weight"]) / 2, atol=1e-7)
    assert meta.train["averaged_from"] == [str(minilm_checkpoint), str(b_path)] and meta.max_length == 192
    # weight 1 on the first checkpoint reproduces its scores exactly; the soup scores differently
    first = average_checkpoints([minilm_checkpoint, b_path], tmp_path / "first", weights=[1, 0])
    ref = PRMScorer.from_checkpoint(minilm_checkpoint).logits(PAIRS[:3])
    assert PRMScorer.from_checkpoint(first).logits(PAIRS[:3]) == ref
    assert PRMScorer.from_checkpoint(out).logits(PAIRS[:3]) != ref
    # checkpoints trained at another length (or architecture) are refused with the reason
    c_path = save_checkpoint(model_b, tok, tmp_path / "c", PRMMeta(backbone="minilm", kind="csp", max_length=256))
    with pytest.raises(CheckpointError, match="max_length differs"):
        average_checkpoints([minilm_checkpoint, c_path], tmp_path / "bad")
    with pytest.raises(ValueError, match="at least two"):
        average_checkpoints([minilm_checkpoint], tmp_path / "bad")
    assert cli_main(["average-prm", f"checkpoints=[{minilm_checkpoint},{c_path}]", f"output={tmp_path / 'bad'}"]) == 1
    assert not (tmp_path / "bad").exists()
    assert cli_main(["average-prm", f"checkpoints=[{minilm_checkpoint},{b_path}]", f"output={tmp_path / 'cli'}"]) == 0
    assert PRMScorer.from_checkpoint(tmp_path / "cli").logits(PAIRS[:3]) == PRMScorer.from_checkpoint(out).logits(
        PAIRS[:3])


def test_ensemble_scores_by_the_members_mean_logit(minilm_checkpoint, tmp_path):
    from pcr_ray.prm.ensemble import PRMEnsemble

    model, tok = build_model("minilm", seed=1)  # another head initialisation: other logits
    other = save_checkpoint(model, tok, tmp_path / "prm1", PRMMeta(backbone="minilm", kind="csp"))
    a, b = PRMScorer.from_checkpoint(minilm_checkpoint), PRMScorer.from_checkpoint(other)
    la, lb = a.logits(PAIRS), b.logits(PAIRS)
    assert la != pytest.approx(lb, abs=1e-4)
    both = PRMEnsemble([a, b])
    assert both.logits(PAIRS) == pytest.approx([(x + y) / 2 for x, y in zip(la, lb, strict=True)], abs=1e-6)
    assert both.score(PAIRS) == pytest.approx([sigmoid((x + y) / 2) for x, y in zip(la, lb, strict=True)], abs=1e-6)
    assert PRMEnsemble([a]).score(PAIRS) == pytest.approx(a.score(PAIRS), abs=1e-6)
    assert both.logits([]) == []
    assert [m["checkpoint"] for m in both.identity["members"]] == [a.identity["checkpoint"], b.identity["checkpoint"]]
    with pytest.raises(ValueError, match="at least one"):
        PRMEnsemble([])
