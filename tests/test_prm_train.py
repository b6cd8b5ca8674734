"""The training loop in this process: learning on real pairs (MiniLM), exact resume, checkpoint round trips."""

from __future__ import annotations

import itertools

import pytest

from pcr_ray.prm.checkpoints import select_pairs
from pcr_ray.prm.model import PRMMeta, build_model, save_checkpoint
from pcr_ray.prm.scorer import PRMScorer
from pcr_ray.prm.train_loop import (
    LocalSession,
    TrainConfig,
    TrainingInterrupted,
    pair_logits,
    pair_loss,
    train_local,
    train_loop,
)
from tests.prm_helpers import small_pairs, tiny_backbone


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_backbone(tmp_path_factory.mktemp("tiny") / "bert")


@pytest.fixture(scope="module")
def gen_pairs():
    rows = small_pairs(40)
    train = [r for r in rows if r["split"] != "test"]
    test = [r for r in rows if r["split"] == "test"] or rows[:8]
    return train[:48], test[:16]


def _scores(path, rows):
    sc = PRMScorer.from_checkpoint(path, max_length=96)
    return sc.score([(r["context"], r["pos_step"]) for r in rows] + [(r["context"], r["neg_step"]) for r in rows])


def test_resume_continues_exactly(tiny, gen_pairs, tmp_path):
    train, val = gen_pairs
    cfg = {"backbone": str(tiny), "epochs": 2, "batch_size": 8, "max_length": 96, "lr": 1e-3, "seed": 5,
           "progress": False}
    straight_metrics, straight = train_local(train, val, tmp_path / "straight", cfg)
    full = TrainConfig.from_dict({**cfg, "n_train": len(train)})
    with pytest.raises(TrainingInterrupted):  # preempted right after the first epoch's checkpoint
        train_loop(full, LocalSession(train, val, tmp_path / "resumed", seed=5, stop_after=1))
    session = LocalSession(train, val, tmp_path / "resumed", seed=5)
    resumed_metrics = train_loop(full, session)
    assert [r["epoch"] for r in session.reports] == [1]  # only the missing epoch ran
    resumed = session.checkpoints()[-1] / "prm"
    assert _scores(resumed, val) == _scores(straight, val)  # bit-identical to an uninterrupted run
    assert resumed_metrics["train_loss"] == straight_metrics["train_loss"]
    # a finished run resumed again does nothing and keeps its result
    again = LocalSession(train, val, tmp_path / "resumed", seed=5)
    assert train_loop(full, again)["epoch"] == 1
    assert again.reports == []


def test_checkpoint_round_trips_scores_exactly(tiny, gen_pairs, tmp_path):
    import torch

    train, val = gen_pairs
    model, tok = build_model(str(tiny), seed=3, dropout=0.0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = {k: [r[k] for r in train[:8]] for k in ("context", "pos_step", "neg_step")}
    for _ in range(3):
        lp, ln = pair_logits(model, tok, batch, 96, torch.device("cpu"))
        loss = pair_loss(lp, ln, "pairwise")
        opt.zero_grad()
        loss.backward()
        opt.step()
    pairs = [(r["context"], r["pos_step"]) for r in val]
    in_memory = PRMScorer(model, tok, max_length=96).score(pairs)
    path = save_checkpoint(model, tok, tmp_path / "ck", PRMMeta(backbone=str(tiny), dropout=0.0))
    assert PRMScorer.from_checkpoint(path, max_length=96).score(pairs) == in_memory


def test_pointwise_mode_and_time_budget(tiny, gen_pairs, tmp_path):
    train, val = gen_pairs
    m, path = train_local(train, val, tmp_path / "pw", {"backbone": str(tiny), "loss": "pointwise", "epochs": 3,
                                                        "batch_size": 4, "max_length": 64, "max_batches": 1,
                                                        "progress": False})
    assert m["stopped_early"] is True and m["epoch"] == 0 and m["train_pairs"] == 4
    assert (path / "prm.json").exists() and 0.0 <= m["val_pairwise_acc"] <= 1.0


@pytest.mark.parametrize("loss", ["pairwise", "listwise"])
def test_bf16_precision_trains_under_autocast_and_saves_fp32_weights(tiny, gen_pairs, tmp_path, loss):
    """precision=bf16 runs the forward pass in bfloat16 (the weights then differ from the fp32 run's), follows
    the fp32 run's loss closely, and keeps the weights and checkpoint in float32."""
    import torch

    from pcr_ray.prm.model import load_checkpoint

    train, val = gen_pairs
    cfg = {"backbone": str(tiny), "epochs": 1, "batch_size": 8, "max_length": 96, "lr": 1e-3, "seed": 2,
           "loss": loss, "progress": False}
    m32, p32 = train_local(train, val, tmp_path / "fp32", cfg)
    m16, p16 = train_local(train, val, tmp_path / "bf16", {**cfg, "precision": "bf16"})
    w32 = load_checkpoint(p32)[0].state_dict()
    w16 = load_checkpoint(p16)[0].state_dict()
    assert all(t.dtype == torch.float32 for t in w16.values() if t.is_floating_point())
    assert any(not torch.equal(w32[k], w16[k]) for k in w32)  # bf16 arithmetic changed the updates
    assert m16["train_pairs"] == m32["train_pairs"]
    assert abs(m16["train_loss"] - m32["train_loss"]) < 0.05 * m32["train_loss"], (m16, m32)
    with pytest.raises(ValueError, match="precision must be one of"):
        TrainConfig.from_dict({**cfg, "precision": "fp16"})


@pytest.mark.slow
def test_short_minilm_training_learns(data_dir, tmp_path):
    """Real pairs (GSM8K gold traces, CSP negatives), real MiniLM: one short seeded epoch lowers the held-out loss
    and lifts held-out pairwise accuracy well above chance (measured here: about 0.8 after 128 pairs)."""
    from pcr_ray.data.readers import iter_gsm8k
    from pcr_ray.negatives.pairs import PairConfig, pairs_from_problems
    from pcr_ray.prm.train_loop import evaluate_pairs

    probs = [p.to_dict() for p in itertools.islice(iter_gsm8k("train", data_dir), 400) if p.gold_trace]
    rows = pairs_from_problems(probs, PairConfig(kinds=("principle_swap", "variable_substitution"), csp_per_kind=1))
    train = select_pairs([r for r in rows if r["split"] == "train"], 128, seed=0)
    val = select_pairs([r for r in rows if r["split"] != "train"], 64, seed=0)
    assert not {r["problem_id"] for r in train} & {r["problem_id"] for r in val}
    cfg = TrainConfig(epochs=1, batch_size=16, max_length=128, lr=1e-4, head_lr=2e-3, progress=False,
                      n_train=len(train), seed=0)
    model, tok = build_model("minilm", seed=cfg.seed, dropout=cfg.dropout)  # the loop's initial model
    loss0, c0, n0 = evaluate_pairs(model, tok, LocalSession([], val, tmp_path / "x").val_batches(64), cfg,
                                   model.head.weight.device)
    session = LocalSession(train, val, tmp_path / "run")
    last = train_loop(cfg, session)
    assert last["val_loss"] < loss0 / n0
    assert last["val_pairwise_acc"] > max(0.65, c0 / n0), (c0 / n0, last)


def test_ensure_checkpoint_trains_once_then_reuses(tiny, tmp_path, monkeypatch):
    """A quick checkpoint is keyed by its recipe, data and code: the same key reuses it, another trains anew."""
    from pcr_ray.prm import checkpoints as ck

    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "cache"))
    assert ck.find_checkpoint("random") is None
    kw = {"budget_pairs": 24, "epochs": 1, "val_pairs": 8, "backbone": str(tiny),
          "sources": [{"name": "physics", "kwargs": {"n": 30, "seed": 99}},
                      {"name": "gsm8k_train", "data_dir": str(tmp_path / "no_data"), "limit": 5}],
          "train_overrides": {"max_length": 64, "progress": False}}
    recipe = ck.recipe_of("random", "shared_context", **kw)
    path = ck.ensure_checkpoint("random", **kw)
    # not the default recipe: a folder of its own beside the default's, named by its key
    assert path == ck.default_checkpoint_dir("random", "shared_context", recipe)
    assert path.parent == tmp_path / "cache" / "prm" and path.name.startswith("random_shared-")
    assert ck.find_checkpoint("random", recipe=recipe) == path and ck.find_checkpoint("random") is None
    sc = PRMScorer.from_checkpoint(path, max_length=64)
    assert sc.identity["kind"] == "random" and sc.identity["train"]["train_pairs"] == 24
    # what it was trained on is recorded, an absent optional data set included, and `solve --verbose` says it
    on = ck.trained_on(path)
    assert on["problems"]["physics"] == 30 and on["problems"]["gsm8k_train"].startswith("absent")
    assert on["train_pairs"] == 24
    from pcr_ray.solve import describe_scorer

    assert "prm trained on: physics 30, gsm8k_train absent problems; 24 train pairs" in describe_scorer(sc)
    stamp = (path / "prm.json").stat().st_mtime_ns
    assert ck.ensure_checkpoint("random", **kw) == path  # cached: no training
    assert (path / "prm.json").stat().st_mtime_ns == stamp
    assert not list(path.parent.glob(".run_*")) and not list(path.parent.glob(".tmp_*"))
    # another recipe is another key and another folder
    other = ck.recipe_of("random", "shared_context", **{**kw, "seed": 1})
    assert ck.recipe_key(other) != ck.recipe_key(recipe) and ck.default_checkpoint_dir(
        "random", "shared_context", other) != path
    # a checkpoint made by other code (or data) is not reused: its stored key no longer matches
    import json

    stored = json.loads((path / ck.RECIPE_FILE).read_text())
    assert stored["key"] == ck.recipe_key(recipe) and stored["recipe"]["budget_pairs"] == 24
    (path / ck.RECIPE_FILE).write_text(json.dumps({**stored, "key": "made-by-older-code"}))
    assert ck.find_checkpoint("random", recipe=recipe) is None
    # a checkpoint trained on an older rendering warns when loaded by hand
    meta = json.loads((path / "prm.json").read_text())
    assert meta["render"] == 2
    (path / "prm.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "render"}))
    with pytest.warns(UserWarning, match="rendering v1"):
        PRMScorer.from_checkpoint(path, max_length=64)
    with pytest.raises(ValueError, match="kind"):
        ck.ensure_checkpoint("bogus")


def test_recipe_key_follows_the_data_files(tmp_path):
    """The key hashes the content of the data files a source reads, not their path or time."""
    from pcr_ray.prm import checkpoints as ck

    (tmp_path / "a" / "gsm8k").mkdir(parents=True)
    (tmp_path / "a" / "gsm8k" / "train.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    src = [{"name": "gsm8k_train", "data_dir": str(tmp_path / "a")}]
    key = ck.recipe_key(ck.recipe_of("csp", "shared_context", sources=src))
    (tmp_path / "a" / "gsm8k" / "train.jsonl").write_text('{"question": "q", "answer": "#### 2"}\n')
    assert ck.recipe_key(ck.recipe_of("csp", "shared_context", sources=src)) != key
    assert ck.data_digest([{"name": "physics"}]) == ck.data_digest([])  # generated: no files


def test_init_from_continues_from_a_checkpoint(tiny, gen_pairs, tmp_path):
    """init_from starts from a finished PRM's weights (head included), not from a freshly initialized model."""
    train, val = gen_pairs
    cfg = {"backbone": str(tiny), "epochs": 1, "batch_size": 8, "max_length": 96, "lr": 1e-3, "seed": 5,
           "progress": False}
    _, first = train_local(train, val, tmp_path / "first", cfg)
    still = {**cfg, "lr": 1e-12, "head_lr": 1e-12, "max_batches": 1, "seed": 6}  # one batch, no real update
    m, cont = train_local(train, val, tmp_path / "cont", {**still, "init_from": str(first)})
    _, fresh = train_local(train, val, tmp_path / "fresh", still)
    start, after, new = _scores(first, val), _scores(cont, val), _scores(fresh, val)
    assert m["train_pairs"] == 8
    assert max(abs(x - y) for x, y in zip(after, start, strict=True)) < 1e-6
    assert max(abs(x - y) for x, y in zip(new, start, strict=True)) > 1e-3
    with pytest.raises(FileNotFoundError, match="init_from"):
        train_local(train, val, tmp_path / "bad", {**cfg, "init_from": str(tmp_path / "nope")})
    with pytest.raises(ValueError, match="pooling"):  # another backbone or pooling than the checkpoint's
        train_local(train, val, tmp_path / "bad2", {**cfg, "init_from": str(first), "pooling": "cls"})


def test_kind_weights_shift_a_limited_subset():
    from pcr_ray.pipeline.train_prm import pair_rank

    keys = [(f"p{i}|0|{kind}|x", kind) for i in range(4000) for kind in ("a", "b")]

    def share_b(weights):
        top = sorted(keys, key=lambda kk: -pair_rank(kk[0], 0, weights.get(kk[1], 1.0)))[:1000]
        return sum(k == "b" for _, k in top) / len(top)

    assert 0.45 < share_b({}) < 0.55  # natural share
    assert 0.62 < share_b({"b": 2.0}) < 0.72  # weight 2: odds about 2:1
    assert share_b({"b": 0.5}) < 0.38
    assert pair_rank("k", 0) == pair_rank("k", 0) != pair_rank("k", 1)  # deterministic, seeded


def test_the_quick_prm_key_covers_the_code_that_makes_its_pairs():
    """Every CODE_FILES pattern names files, among them the pair makers and the enumerator behind alternative_step."""
    from pcr_ray.paths import PACKAGE_DIR
    from pcr_ray.prm import checkpoints as ck

    matched = {pattern: sorted(f.relative_to(PACKAGE_DIR).as_posix() for f in PACKAGE_DIR.glob(pattern))
               for pattern in ck.CODE_FILES}
    assert all(matched.values()), [p for p, fs in matched.items() if not fs]
    files = {f for fs in matched.values() for f in fs}
    assert {"negatives/pairs.py", "negatives/search_pairs.py", "generators/enumerate.py"} <= files


@pytest.mark.slow
def test_pairs_made_in_two_processes_are_the_pairs_made_in_one():
    """pairs_from_problems(processes=2) (the quick PRM's first use) returns the serial rows, in the same order."""
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.negatives.pairs import KIND_GROUPS, PairConfig, pairs_from_problems

    problems = [p.to_dict() for p in generate_problems(100, seed=7919, split="train") if p.gold_trace]
    cfg = PairConfig(kinds=KIND_GROUPS["csp"], seed=0)
    serial = pairs_from_problems(problems, cfg)
    assert serial and pairs_from_problems(problems, cfg, processes=2) == serial
