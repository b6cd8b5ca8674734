"""The evaluation pipeline end to end on the session's local Ray: results, metrics, resume, faults, sweeps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pcr_ray.core.verifier import verify
from pcr_ray.evaluate import compose_config, evaluate
from pcr_ray.pipeline.results import read_shards, shard_paths
from tests.pipeline_util import read_metrics, read_rows, smoke_overrides, tiny_checkpoint

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SMOKE_PROBLEMS = 4
SMOKE_METHODS = ("verifier_only", "nsprm", "greedy")


@pytest.fixture(scope="module")
def tiny_prm(tmp_path_factory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("prm") / "tiny")


@pytest.fixture(scope="module")
def smoke_run(ray_session, tiny_prm, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("smoke")
    return evaluate(compose_config(smoke_overrides(run, tiny_prm)))


def test_one_row_per_problem_and_method_with_traces_scores_and_counts(smoke_run):
    rows = read_rows(smoke_run)
    keys = [(r["problem_id"], r["method"]) for r in rows]
    assert len(keys) == len(set(keys)) == SMOKE_PROBLEMS * len(SMOKE_METHODS)
    assert {m for _, m in keys} == set(SMOKE_METHODS)
    assert all(not r["error"] for r in rows)
    assert all(r["horizon"] in ("short", "long") and r["gold_trace_json"] for r in rows)
    assert {r["template_split"] for r in rows} == {"heldout"}  # the smoke set evaluates unseen templates only
    for r in rows:
        assert r["answered"] or r["flagged"], "a missing answer is an error signal"
        scores = json.loads(r["step_scores"])
        verdicts = json.loads(r["step_verdicts"])
        assert len(scores) == len(verdicts) == r["n_steps"]
        if r["method"] == "verifier_only":
            assert r["prm_calls"] == 0 and all(s is None for s in scores)
        else:
            assert all(0.0 <= s <= 1.0 for s in scores)
        if r["answered"] and r["method"] != "prm_only":
            assert verify(r["trace_json"]).ok, "verifier-first search returns only verified traces"
            assert r["answer_unit"] and r["candidates"] > 0
        assert r["silent_failure"] == (r["answered"] and not r["correct"] and not r["flagged"])
    assert sum(r["prm_calls"] for r in rows if r["method"] == "nsprm") > 0


def test_metrics_json_agrees_with_results_and_files_exist(smoke_run):
    rows = read_rows(smoke_run)
    m = read_metrics(smoke_run)
    assert list(m["methods"]) == list(SMOKE_METHODS)
    for method, d in m["methods"].items():
        mine = [r for r in rows if r["method"] == method]
        assert d["n"] == len(mine)
        assert d["correct"] == sum(r["correct"] for r in mine)
        assert d["silent_failures"] == sum(r["silent_failure"] for r in mine)
        assert sum(d["error_types"].values()) == sum(not r["correct"] for r in mine)
        assert d["mean_candidates"] == pytest.approx(sum(r["candidates"] for r in mine) / len(mine))
    assert m["rows_this_run"] == len(rows) and m["problems_per_s"] > 0
    assert all(d["by_template_split"]["heldout"]["n"] == d["n"] for d in m["methods"].values())
    for name in ("config.yaml", "report.html", "results.parquet"):
        assert (smoke_run / name).stat().st_size > 0
    assert "beam_width: 2" in (smoke_run / "config.yaml").read_text()


def test_separate_stage_layout_gives_the_same_rows(smoke_run, tmp_path, tiny_prm):
    """pipeline.fuse_light_stages=false (extract givens and grade as their own Ray Data task stages) runs the
    same functions: the same answers, grades and counts as the default layout."""
    run = evaluate(compose_config(smoke_overrides(tmp_path / "separate", tiny_prm,
                                                  "pipeline.fuse_light_stages=false")))
    key = lambda r: (r["problem_id"], r["method"])  # noqa: E731
    cols = ("answer_value", "answer_unit", "correct", "silent_failure", "error_type", "n_steps", "candidates",
            "prm_calls", "step_scores", "givens_json")
    fused = {key(r): [r[c] for c in cols] for r in read_rows(smoke_run)}
    separate = {key(r): [r[c] for c in cols] for r in read_rows(run)}
    assert separate == fused and len(fused) == SMOKE_PROBLEMS * len(SMOKE_METHODS)


def test_rerun_skips_finished_rows_and_redoes_a_lost_shard(smoke_run, tmp_path, tiny_prm):
    run = tmp_path / "resumed"
    shutil.copytree(smoke_run, run)
    evaluate(compose_config(smoke_overrides(run, tiny_prm)))
    assert read_metrics(run)["rows_this_run"] == 0 and read_metrics(run)["rows_resumed"] == 12
    shards = shard_paths(run)
    lost = shards[0]
    n_lost = pq.read_table(lost).num_rows
    kept = {p: p.stat().st_mtime_ns for p in shards[1:]}
    lost.unlink()
    evaluate(compose_config(smoke_overrides(run, tiny_prm)))
    m = read_metrics(run)
    assert m["rows_this_run"] == n_lost and m["rows_resumed"] == 12 - n_lost
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items()), "finished shards are never rewritten"
    keys = [(r["problem_id"], r["method"]) for r in read_rows(run)]
    assert len(keys) == len(set(keys)) == 12


def test_killed_workers_and_model_actor_are_restarted_and_a_failing_problem_becomes_an_error_row(
        ray_session, tiny_prm, tmp_path):
    run = tmp_path / "faults"
    markers = {site: tmp_path / f"{site}.marker" for site in ("search_worker", "prm_actor")}
    bad = "physics/1/2/catch_up"
    overrides = smoke_overrides(run, tiny_prm, *(f"+pipeline.faults.{s}={p}" for s, p in markers.items()),
                                f"+pipeline.faults.raise_for_problem={bad}")
    evaluate(compose_config(overrides))
    for site, marker in markers.items():
        assert marker.exists(), f"the {site} fault was not triggered"
        assert "pid=" in marker.read_text()
    rows = read_rows(run)
    keys = [(r["problem_id"], r["method"]) for r in rows]
    assert len(keys) == len(set(keys)) == 12, "every problem exactly once, nothing lost, nothing doubled"
    assert read_shards(run).num_rows == 12, "no duplicate rows on disk either"
    errs = [r for r in rows if r["error"]]
    assert {r["problem_id"] for r in errs} == {bad} and len(errs) == len(SMOKE_METHODS)
    assert all("injected fault" in r["error"] and r["attempts"] == 2 for r in errs)
    assert all(r["error_type"] == "pipeline_error" and r["flagged"] for r in errs)
    assert read_metrics(run)["methods"]["nsprm"]["pipeline_errors"] == 1


def test_a_problem_that_always_kills_its_worker_is_recorded_and_the_rest_complete(ray_session, tmp_path):
    run = tmp_path / "doomed"
    doomed = "physics/1/0/incline_slide"
    overrides = smoke_overrides(run, None, "methods=[verifier_only]", f"+pipeline.faults.exit_for_problem={doomed}",
                                "pipeline.worker_max_task_retries=1",
                                "pipeline.rounds=2")
    evaluate(compose_config(overrides))
    rows = read_rows(run)
    assert sorted(r["problem_id"] for r in rows) == sorted({r["problem_id"] for r in rows})
    assert len(rows) == SMOKE_PROBLEMS
    by_id = {r["problem_id"]: r for r in rows}
    assert "failed in every round" in by_id[doomed]["error"]
    failures = read_metrics(run)["pipeline_failures"]
    assert all(not r["error"] for pid, r in by_id.items() if pid != doomed), (
        {pid: r["error"] for pid, r in by_id.items()}, failures)
    assert len(failures) == 2, failures


def test_bad_configuration_fails_clearly_before_any_work(ray_session, tmp_path):
    with pytest.raises(ValueError, match="unknown method 'nsprn'"):
        evaluate(compose_config(smoke_overrides(tmp_path / "a", None, "methods=[nsprn]")))
    with pytest.raises(FileNotFoundError, match="prm.checkpoint"):
        evaluate(compose_config(smoke_overrides(tmp_path / "b", tmp_path / "missing")))
    with pytest.raises(ValueError, match="not configured in `generators`"):
        evaluate(compose_config(smoke_overrides(tmp_path / "c", None, "methods=[verifier_only@llm]")))
    assert not (tmp_path / "a" / "shards").exists()


def test_hydra_sweep_reuses_ray_and_summarize_merges_the_runs(ray_session, smoke_run, tmp_path, capsys):
    import ray

    from pcr_ray import evaluate as ev
    from pcr_ray.pipeline.ray_runtime import started_here
    from pcr_ray.pipeline.summarize import main as summarize_main

    sweep = tmp_path / "sweep"
    # the sweep also limits physics searches to one step by source: the override must reach the search workers
    rc = ev.main(["-m", "experiment=smoke", "methods=[verifier_only]", "search.beam_width=1,2",
                  "+search_source_overrides.physics.max_steps=1", f"hydra.sweep.dir={sweep}"])
    assert rc == 0
    assert ray.is_initialized() and not started_here(), "the sweep ran on the already-initialized Ray"
    runs = sorted(p.parent for p in sweep.rglob("metrics.json"))
    assert len(runs) == 2 and all((r / ".hydra" / "overrides.yaml").exists() for r in runs)
    default_steps = [r["n_steps"] for r in read_rows(smoke_run) if r["method"] == "verifier_only"]
    assert max(default_steps) > 1  # without the override (max_steps 4) some traces are longer
    swept = [r for run in runs for r in read_rows(run)]
    assert {r["source"] for r in swept} == {"physics"} and max(r["n_steps"] for r in swept) == 1
    assert summarize_main([f"dir={sweep}"]) == 0
    out = capsys.readouterr().out
    assert "search.beam_width" in out
    import csv

    with open(sweep / "summary.csv") as fh:
        table = list(csv.DictReader(fh))
    assert sorted(int(r["search.beam_width"]) for r in table) == [1, 2]
    assert all(r["method"] == "verifier_only" and int(r["n"]) == SMOKE_PROBLEMS for r in table)
    assert (sweep / "summary.png").stat().st_size > 1000 and (sweep / "summary.md").exists()
    # the two sweep points' verifier_only cells compared on the same problems
    md = (sweep / "summary.md").read_text()
    assert "## Paired comparisons" in md and md.count(":verifier_only vs ") == 1


def test_the_givens_parsers_cost_is_one_sweep_extract_beside_oracle(ray_session, tmp_path):
    """docs/pipeline.md's command at smoke size: each run records its givens mode, the gold run's report carries
    the oracle banner, and summarize puts the two side by side with a paired comparison."""
    from pcr_ray import evaluate as ev
    from pcr_ray.pipeline.summarize import summarize

    sweep = tmp_path / "givens_cost"
    assert ev.main(["-m", "experiment=smoke", "methods=[verifier_only]", "pipeline.givens=extract,gold",
                    f"hydra.sweep.dir={sweep}"]) == 0
    runs = {read_metrics(p.parent)["givens"]: p.parent for p in sweep.rglob("metrics.json")}
    assert set(runs) == {"extract", "gold"}
    for givens, run in runs.items():
        assert {r["givens_source"] for r in read_rows(run)} == {givens}
        assert ('id="oracle-givens"' in (run / "report.html").read_text()) == (givens == "gold")
    md = summarize(sweep)["md"].read_text()
    assert "verifier_only (oracle givens)" in md and "extracted" in md
    assert md.count(":verifier_only vs ") == 1 and "(oracle givens):verifier_only" in md
