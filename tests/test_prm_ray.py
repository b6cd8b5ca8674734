"""The Ray side: make-pairs on Ray Data, train-prm on Ray Train with 2 CPU workers (and resume), eval-prm."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pcr_ray.configs import compose
from pcr_ray.negatives.pairs import SPLITS, PairConfig, pairs_from_problems
from pcr_ray.pipeline.eval_prm import pair_metrics
from pcr_ray.pipeline.stats import auroc
from pcr_ray.prm.base import META_FILE
from tests import mlflow_util
from tests.prm_helpers import problem_rows, tiny_backbone

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def pairs_dir(ray_session, tmp_path_factory):
    from pcr_ray.pipeline.make_pairs import make_pairs

    root = tmp_path_factory.mktemp("pairs")
    rows = problem_rows(60)
    table = pd.DataFrame(rows).assign(gold_trace=lambda d: d["gold_trace"].map(json.dumps))
    table.to_parquet(root / "problems.parquet")
    summary = make_pairs(compose("make_pairs", values={
        "sources": [{"path": str(root / "problems.parquet")}], "out_dir": str(root / "out"),
        "num_blocks": 4, "batch_size": 8, "csp_per_kind": 1, "random_per_kind": 1}))
    return root / "out", rows, summary


def test_make_pairs_splits_by_problem_and_matches_in_process(pairs_dir):
    out, rows, summary = pairs_dir
    parts = {s: pd.read_parquet(out / s) for s in SPLITS}
    ids = [set(parts[s]["problem_id"]) for s in SPLITS]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])  # no problem in two splits
    every = pd.concat(parts.values())
    assert summary["pairs"] == len(every) and summary["problems"] == len(rows)
    assert summary["pairs_by_split"] == {s: len(parts[s]) for s in SPLITS}
    assert every[every["kind"].isin(["principle_swap", "variable_substitution"])]["verified"].all()
    assert 0.0 < summary["random_rejected_by_verifier_all"] < 1.0
    # the Ray Data job (4 blocks, batches of 8) makes exactly what one process makes: seeded per (problem, step)
    local = pd.DataFrame(pairs_from_problems(rows, PairConfig(csp_per_kind=1, random_per_kind=1)))
    key = ["problem_id", "t", "kind", "neg_step"]
    a = every.sort_values(key).reset_index(drop=True)
    b = local.sort_values(key).reset_index(drop=True)
    cols = key + ["pos_step", "context", "verified"]
    assert a[cols].astype(str).values.tolist() == b[cols].astype(str).values.tolist()
    assert json.loads((out / "summary.json").read_text())["pairs"] == len(every)


@pytest.mark.slow
def test_ray_train_two_workers_checkpoints_resumes_and_evaluates(pairs_dir, tmp_path):
    from pcr_ray.pipeline.eval_prm import eval_prm
    from pcr_ray.pipeline.train_prm import default_kinds, load_pairs_dataset, train_prm
    from pcr_ray.prm.scorer import PRMScorer

    out, _, _ = pairs_dir
    tiny = tiny_backbone(tmp_path / "tiny")
    values = {
        "prm": {"backbone": str(tiny), "kind": "csp", "max_length": 64},
        "pairs_dir": str(out), "limit_train": 32, "limit_val": 16, "output": str(tmp_path / "final"),
        "storage_path": str(tmp_path / "ray_train"), "run_name": "t2", "shuffle_buffer": 0,
        "train": {"epochs": 1, "batch_size": 8, "lr": 1e-3, "progress": False, "seed": 0},
        "scaling": {"num_workers": 2, "use_gpu": False, "cpus_per_worker": 1},
    }
    first = train_prm(compose("train_prm", values=values))
    assert [h["epoch"] for h in first["history"]] == [0]
    assert first["history"][0]["train_pairs"] == 32  # both workers' shards counted (all-reduced)
    subset = load_pairs_dataset(out, "train", default_kinds("csp"), 32, 0).to_pandas()
    assert first["train_pairs_by_kind"] == subset["kind"].value_counts().to_dict()
    assert sum(first["train_pairs_by_kind"].values()) == 32
    values["train"]["epochs"] = 2
    db = tmp_path / "mlflow.db"
    values["tracking"] = {"kind": "mlflow", "uri": f"sqlite:///{db}"}
    second = train_prm(compose("train_prm", values=values))  # same run: resumes after epoch 0
    assert [h["epoch"] for h in second["history"]] == [0, 1]
    # the MLflow run, read back: the config, both epochs' curves, the per-batch loss, the checkpoint's meta file
    (run,) = mlflow_util.runs(db)
    assert run.info.status == "FINISHED" and run.data.tags["pcr_ray.command"] == "train-prm"
    assert run.data.params["train.epochs"] == "2" and run.data.params["prm.kind"] == "csp"
    acc = mlflow_util.curve(db, run.info.run_id, "epoch/val_pairwise_acc")
    assert acc == [(h["epoch"] + 1, pytest.approx(h["val_pairwise_acc"])) for h in second["history"]]
    losses = [v for h in second["history"] for v in h["step_losses"]]
    assert len(losses) == 4  # 2 epochs x 16 pairs per worker in batches of 8
    assert [v for _, v in mlflow_util.curve(db, run.info.run_id, "train/step_loss")] == pytest.approx(losses)
    assert run.data.metrics["train_pairs"] == 32 and mlflow_util.artifacts(db, run.info.run_id) == {META_FILE}
    assert second["history"][0] == first["history"][0]
    assert second["metrics"]["epoch"] == 1
    sc = PRMScorer.from_checkpoint(second["checkpoint"], max_length=64)
    assert sc.identity["kind"] == "csp" and sc.identity["train"]["epochs"] == 2
    res = eval_prm(compose("eval_prm", values={
        "prm": {"checkpoint": second["checkpoint"], "max_length": 64}, "pairs_dir": str(out), "split": "test",
        "use_ray": True, "actors": 1, "cpus_per_actor": 1, "out": str(tmp_path / "eval.json")}))
    assert {"principle_swap", "all"} <= set(res["by_kind"])
    assert res["by_kind"]["all"]["pairs"] == len(pd.read_parquet(out / "test"))
    assert json.loads((tmp_path / "eval.json").read_text())["by_kind"] == res["by_kind"]


def test_auroc_and_pair_metrics():
    assert auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auroc([0.1], [0.9]) == 0.0
    assert auroc([0.5, 0.5], [0.5]) == 0.5
    df = pd.DataFrame({"problem_id": ["a", "a", "b"], "t": [0, 0, 1], "kind": ["principle_swap"] * 2 + ["random_op"],
                       "r_pos": [0.9, 0.9, 0.4], "r_neg": [0.1, 0.95, 0.2]})
    m = pair_metrics(df)
    assert m["principle_swap"]["pairwise_acc"] == 0.5 and m["random_op"]["pairwise_acc"] == 1.0
    assert m["all"]["pairs"] == 3 and m["csp (all)"]["pairs"] == 2


def test_entry_points_help_and_clear_errors(tmp_path, monkeypatch, capsys):
    from pcr_ray.pipeline import eval_prm, make_pairs, train_prm

    for mod in (make_pairs, train_prm, eval_prm):
        assert mod.main(["--help"]) == 0
        assert "usage: pcr-ray" in capsys.readouterr().out
        assert mod.main(["no_such_option=1"]) == 2
        assert "bad configuration" in capsys.readouterr().err
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path))
    assert eval_prm.main(["use_ray=false"]) == 1
    assert "train-prm" in capsys.readouterr().err  # says how to get a checkpoint
    assert train_prm.main([f"pairs_dir={tmp_path / 'none'}"]) == 1
    assert "make-pairs" in capsys.readouterr().err


def test_lowest_ranks_keeps_the_limit_lowest_in_rank_order(ray_session):
    """The limited subset: the `limit` lowest ranks in rank order, across blocks (whole lists: every row up to the
    limit-th's rank)."""
    import numpy as np
    import ray

    from pcr_ray.pipeline.train_prm import _lowest_ranks

    rng = np.random.default_rng(0)
    pairs = pd.DataFrame({"rank": rng.random(500), "i": np.arange(500)})
    lists = pairs.assign(rank=np.repeat(rng.random(100), 5))  # 100 lists of 5 rows sharing a rank

    def blocks(df):
        return ray.data.from_pandas([df.iloc[k::7] for k in range(7)])

    got = _lowest_ranks(blocks(pairs), 40, False).to_pandas()
    assert got["i"].tolist() == pairs.sort_values("rank").head(40)["i"].tolist() and "rank" not in got.columns
    whole = _lowest_ranks(blocks(lists), 42, True).to_pandas()
    cut = sorted(lists["rank"])[41]  # the 42nd lowest rank is the 9th list's: 9 whole lists are kept
    assert sorted(whole["i"]) == sorted(lists.loc[lists["rank"] <= cut, "i"]) and len(whole) == 45
    r = lists.set_index("i").loc[whole["i"], "rank"].tolist()
    assert r == sorted(r)


def test_listwise_subset_keeps_whole_lists(pairs_dir, tmp_path):
    """train-prm's listwise subset: whole candidate lists (the Ray Train run itself is the shared loop, tested in
    test_prm_listwise with LocalSession; the README's listwise run trained 27,173 pairs through Ray Train)."""
    from pcr_ray.pipeline.train_prm import default_kinds, load_pairs_dataset, train_prm

    out, _, _ = pairs_dir
    kinds = default_kinds("csp")
    every = load_pairs_dataset(out, "train", kinds).to_pandas()
    lists = ["problem_id", "t", "pos_step"]
    full = every.groupby(lists).size()
    assert full.max() > 1  # the fixture's lists hold several negatives
    sub = load_pairs_dataset(out, "train", kinds, 30, 0, {"principle_swap": 5.0}, whole_lists=True).to_pandas()
    kept = sub.groupby(lists).size()
    assert (kept == full.loc[kept.index]).all()  # no list lost a negative (kind weights ignored)
    assert 30 <= len(sub) < 30 + full.max() and len(kept) < len(full)
    cfg = compose("train_prm", values={"prm": {"kind": "csp"}, "pairs_dir": str(out), "train": {"loss": "listwise"},
                                       "kind_weights": {"principle_swap": 2.0}, "storage_path": str(tmp_path / "rt")})
    with pytest.raises(ValueError, match="kind_weights do not apply to train.loss=listwise"):
        train_prm(cfg)
