"""Experiment tracking (pcr_ray.tracking): what a run logs to MLflow, read back through MLflow's own client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pcr_ray.tracking import evaluation_metrics, flatten_params, metric_key, numeric_leaves, tracked
from tests import mlflow_util
from tests.pipeline_util import read_metrics, read_rows


def test_config_becomes_dotted_params_and_metrics_json_becomes_metrics():
    params = flatten_params({"search": {"beam_width": 2, "ops": ["add", "mul"]}, "run_dir": None, "prms": {},
                             "name": "x" * 7000})
    assert params == {"search.beam_width": "2", "search.ops": '["add", "mul"]', "run_dir": "null", "prms": "{}",
                      "name": "x" * 5997 + "..."}
    assert metric_key("nsprm@llm/by_source/gsm8k/acc") == "nsprm_llm/by_source/gsm8k/acc"
    assert metric_key("a//../b") == "a/__/b"
    tree = {"acc": 0.5, "acc_ci95": [0.2, 0.8], "answered": True, "label": "x", "nan": float("nan"),
            "by_source": {"physics": {"n": 8}}}
    assert numeric_leaves(tree, "m/") == {"m/acc": 0.5, "m/acc_ci95_low": 0.2, "m/acc_ci95_high": 0.8,
                                          "m/by_source/physics/n": 8.0}
    m = evaluation_metrics({"wall_s": 3.0, "dataset": "smoke", "methods": {"nsprm": {"acc": 0.25}},
                            "paired": {"nsprm vs greedy": {"mcnemar_p": 0.5, "significant": False}}})
    assert m == {"wall_s": 3.0, "nsprm/acc": 0.25, "paired/nsprm vs greedy/mcnemar_p": 0.5}


def test_the_job_folder_is_the_fallback_where_hydra_holds_a_config_without_a_run(tmp_path):
    """Hydra's compose API (a notebook, a test) can leave a Hydra config set with no output folder: a command called
    then writes to its fallback folder instead of failing on the missing value."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from pcr_ray.configs import register_schemas
    from pcr_ray.paths import conf_dir
    from pcr_ray.tracking import job_folder

    assert job_folder(tmp_path) == tmp_path  # no Hydra config at all
    register_schemas()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="train_prm", return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        assert job_folder(tmp_path) == tmp_path
    finally:
        HydraConfig.instance().cfg = None


def test_tracking_none_logs_nothing_and_imports_no_mlflow(tmp_path):
    code = ("import sys; from pcr_ray.tracking import tracked\n"
            "with tracked({'kind': 'none'}, 'evaluate', {'a': 1}, sys.argv[1]) as t:\n"
            "    t.log_metrics({'acc': 1.0}); t.log_curve('loss', [1.0]); t.log_artifact(sys.argv[1])\n"
            "assert 'mlflow' not in sys.modules, 'tracking=none imported mlflow'\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=120)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="tracking.kind must be none or mlflow"), \
            tracked({"kind": "wandb"}, "evaluate", {}, tmp_path):
        pass


def test_a_job_that_raises_leaves_a_failed_run_with_what_it_logged(tmp_path):
    db = tmp_path / "mlflow.db"
    with pytest.raises(RuntimeError, match="worker lost"), \
            tracked({"kind": "mlflow", "uri": f"sqlite:///{db}"}, "evaluate", {"a": {"b": 1}}, tmp_path) as t:
        t.log_curve("train/loss", [3.0, 2.0, 1.5])
        raise RuntimeError("worker lost")
    (run,) = mlflow_util.runs(db)
    assert run.info.status == "FAILED" and run.data.params == {"a.b": "1"}
    assert mlflow_util.curve(db, run.info.run_id, "train/loss") == [(1, 3.0), (2, 2.0), (3, 1.5)]


def test_an_evaluate_sweep_is_one_parent_run_with_a_child_per_job(ray_session, tmp_path):
    """`pcr-ray evaluate -m ... tracking=mlflow`: the default store is a SQLite file in the sweep folder; each job's
    run has its config, metrics.json's numbers, the per-problem table and the run's files."""
    from pcr_ray import evaluate as ev

    sweep = tmp_path / "sweep"
    assert ev.main(["-m", "experiment=smoke", "methods=[verifier_only]", "search.beam_width=1,2",
                    "pipeline.progress=false", "tracking=mlflow", f"hydra.sweep.dir={sweep}"]) == 0
    db = sweep / "mlflow.db"
    parent, *children = mlflow_util.runs(db)
    assert parent.data.tags["pcr_ray.sweep"] == str(sweep.resolve()) and parent.info.status == "FINISHED"
    assert len(children) == 2
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert sorted(c.data.params["search.beam_width"] for c in children) == ["1", "2"]
    for child in children:
        assert child.info.status == "FINISHED" and child.data.params["dataset.name"] == "smoke"
        run_dir = Path(child.data.tags["pcr_ray.folder"])
        m = read_metrics(run_dir)
        assert child.data.metrics["verifier_only/acc"] == pytest.approx(m["methods"]["verifier_only"]["acc"])
        assert child.data.metrics["verifier_only/acc_ci95_high"] == pytest.approx(
            m["methods"]["verifier_only"]["acc_ci95"][1])
        assert child.data.metrics["verifier_only/total_candidates"] > 0 and child.data.metrics["wall_s"] > 0
        assert {"metrics.json", "report.html", "config.yaml", "results.parquet", "results.json"} <= \
            mlflow_util.artifacts(db, child.info.run_id)
        table = json.loads(Path(mlflow_util.client(db).download_artifacts(
            child.info.run_id, "results.json", str(tmp_path / child.info.run_id))).read_text())
        rows = read_rows(run_dir)
        assert len(table["data"]) == len(rows) and {"problem_id", "correct", "error_type"} <= set(table["columns"])
        assert not {"raw_output", "trace_json"} & set(table["columns"])  # in results.parquet, not the table
