"""Scoring loads a BERT-family PRM without transformers (pcr_ray.prm.bert, pcr_ray.prm.tokenizer): the same token ids
and the same logits as transformers' own model and tokenizer, in every scoring path, and transformers never imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pcr_ray.prm import bert
from pcr_ray.prm.model import PRMMeta, build_model, encode_pairs, load_checkpoint, minilm_path, save_checkpoint
from pcr_ray.prm.scorer import PRMScorer, load_for_scoring
from pcr_ray.prm.shared import make_packs
from pcr_ray.prm.tokenizer import PRMTokenizer
from tests.prm_helpers import tiny_backbone

CTX = ["A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go? | givens: a=2 m/s^2; t=5 s; v0=0 m/s",
       "Lisa harvests 8 sacks of oranges per day. Each sack contains 35 oranges. " * 9,
       "", "Ünïcode — naïve café, 3½ cups & ∑x² … 東京"]
STEPS = ["d1 = kin_displacement(v0=v0, a=a, t=t) = 25 [m]", "n1 = mul(x=n_sacks, y=oranges_per_sack) = 280 [orange]",
         "answer: a [m/s^2]", "x"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """A tiny random BERT PRM saved as a pair and as a shared-context checkpoint, and a DeBERTa one (not BERT)."""
    root = tmp_path_factory.mktemp("prm_bert")
    out = {}
    for name, arch, attention in (("pair", "bert", "pair"), ("shared", "bert", "shared_context"),
                                  ("deberta", "deberta", "pair")):
        backbone = tiny_backbone(root / f"{name}_backbone", arch=arch)
        model, tok = build_model(str(backbone), seed=3, dropout=0.0, attention=attention, candidate_length=24)
        meta = PRMMeta(backbone=str(backbone), max_length=96, attention=attention, candidate_length=24)
        out[name] = save_checkpoint(model, tok, root / name, meta)
    return out


def test_tokenizer_gives_transformers_ids_in_every_call_scoring_makes() -> None:
    from transformers import AutoTokenizer

    hf, ours = AutoTokenizer.from_pretrained(str(minilm_path())), PRMTokenizer(minilm_path())
    assert (ours.cls_token_id, ours.sep_token_id, ours.pad_token_id) == (hf.cls_token_id, hf.sep_token_id,
                                                                         hf.pad_token_id)
    for max_length in (16, 40, 512):  # 16 and 40 cut the long context (from its start) and a step
        for pad in (True, False):
            a, b = (encode_pairs(t, CTX, STEPS, max_length, pad=pad) for t in (hf, ours))
            for key in ("input_ids", "token_type_ids", "attention_mask"):
                assert (torch.equal(a[key], b[key]) if pad else list(a[key]) == list(b[key])), (max_length, pad, key)
    assert hf(CTX + STEPS, add_special_tokens=False)["input_ids"] == ours(CTX + STEPS, add_special_tokens=False)[
        "input_ids"]
    assert hf(STEPS[1], add_special_tokens=False)["input_ids"] == ours(STEPS[1], add_special_tokens=False)["input_ids"]
    assert hf(CTX[0], STEPS[0])["token_type_ids"] == ours(CTX[0], STEPS[0])["token_type_ids"]
    packs = {name: make_packs(t, list(zip(CTX, STEPS, strict=True)), max_length=64, candidate_length=24, pack_size=2)
             for name, t in (("hf", hf), ("ours", ours))}
    assert packs["hf"] == packs["ours"]
    with pytest.raises(ValueError, match="return_tensors"):
        ours(["x"], return_tensors="np")


@pytest.mark.parametrize("name", ["pair", "shared"])
def test_scores_equal_transformers_model_in_every_path(checkpoints, name: str) -> None:
    ck = checkpoints[name]
    ref_model, ref_tok, meta = load_checkpoint(ck)
    model, tok, _ = load_for_scoring(ck)
    assert isinstance(model.encoder, bert.BertModel) and isinstance(tok, PRMTokenizer)
    assert model.state_dict().keys() == {k for k in ref_model.state_dict() if not k.startswith("encoder.pooler.")}
    pairs = [(c, s) for c in CTX for s in STEPS]
    settings = [{}, {"context_cache": False}, {"bf16": True}] if name == "shared" else [{}, {"bf16": True}]
    for kw in settings:  # the shared checkpoint: the context cache, the packed 4D mask, bf16 autocast
        ref = PRMScorer(ref_model, ref_tok, max_length=meta.max_length, **kw).logits(pairs)
        got = PRMScorer(model, tok, max_length=meta.max_length, **kw).logits(pairs)
        tol = 2e-2 if kw.get("bf16") else 1e-5
        assert max(abs(a - b) for a, b in zip(ref, got, strict=True)) < tol, kw
        assert len({round(v, 4) for v in got}) > len(pairs) // 2  # the scores differ by pair: no constant compared
    scorer = PRMScorer.from_checkpoint(ck)
    assert isinstance(scorer.model.encoder, bert.BertModel)
    assert scorer.logits(pairs) == pytest.approx(PRMScorer(ref_model, ref_tok, max_length=meta.max_length
                                                           ).logits(pairs), abs=1e-5)


def test_int8_rows_on_the_shared_checkpoint_match_transformers(checkpoints) -> None:
    ck = checkpoints["shared"]
    pairs = [(c, s) for c in CTX for s in STEPS]
    ours = PRMScorer.from_checkpoint(ck, int8=True, measure_kernel=False)
    assert isinstance(ours.model.encoder, bert.BertModel) and ours.int8
    from pcr_ray.prm.int8_rows import quantize_rows

    ref_model, ref_tok, meta = load_checkpoint(ck)
    quantize_rows(ref_model.encoder)
    ref = PRMScorer(ref_model, ref_tok, max_length=meta.max_length, int8=True).logits(pairs)
    assert ours.logits(pairs) == pytest.approx(ref, abs=1e-5)


def test_other_encoders_load_through_transformers(checkpoints, tmp_path: Path) -> None:
    model, _, _ = load_for_scoring(checkpoints["deberta"])
    assert not isinstance(model.encoder, bert.BertModel)
    config = json.loads((checkpoints["pair"] / "encoder" / "config.json").read_text())
    assert bert.supports(config) is None
    assert "hidden_act" in bert.supports({**config, "hidden_act": "relu"})
    assert "position_embedding_type" in bert.supports({**config, "position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match="does not reproduce"):
        bert.BertModel({**config, "is_decoder": True})
    (tmp_path / "config.json").write_text(json.dumps(config))
    from safetensors.torch import save_file

    save_file({"embeddings.word_embeddings.weight": torch.zeros(config["vocab_size"], config["hidden_size"])},
              str(tmp_path / bert.WEIGHTS_FILE))
    with pytest.raises(ValueError, match="lacks .* of the encoder's weights"):
        bert.load_bert(tmp_path)


def test_scoring_a_bert_checkpoint_never_imports_transformers(checkpoints) -> None:
    code = ("import sys; from pcr_ray.prm.scorer import PRMScorer; "
            f"s = PRMScorer.from_checkpoint({str(checkpoints['shared'])!r}); s.score([('a problem', 'a step')]); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'transformers'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "[]", out.stdout
