"""The compute-scaling sweep: subsampled best-of-n / weighted / majority picks, and two values of N end to end
(evaluate on the session's local Ray, the enumerator, the quick PRM), with tokens in results and metrics."""

from __future__ import annotations

import json

import pytest

from pcr_ray.evaluate import compose_config, evaluate
from pcr_ray.pipeline.scaling import check_scaling, pick, scaling_specs
from tests.pipeline_util import read_metrics, read_rows
from tests.prm_helpers import small_prm_checkpoint

BUDGETS = (1, 4)
WIDTH = 2


def test_the_three_picks_differ_as_their_rules_say() -> None:
    samples = [{"i": 0, "order": 0, "score": 0.9, "value": 1.0, "key": "A"},
               {"i": 1, "order": 1, "score": 0.3, "value": 2.0, "key": "B"},
               {"i": 2, "order": 2, "score": 0.4, "value": 2.0, "key": "B"},
               {"i": 3, "order": 3, "score": 0.35, "value": 3.0, "key": "C"}]
    assert pick(samples, "best_of_n") == 0                 # the best-scored sample
    assert pick(samples, "majority") in (1, 2)             # the answer two samples give
    assert pick(samples, "weighted") == 0                  # 0.9 outweighs 0.3 + 0.4
    samples[1]["score"] = 0.6                              # now 0.6 + 0.4 > 0.9
    assert samples[pick(samples, "weighted")]["key"] == "B"
    assert pick([], "majority") is None


def test_specs_follow_the_budget_and_width() -> None:
    specs = {s["label"]: s for s in scaling_specs({"budgets": [8, 1, 4], "width": 4, "methods": ["best_of_n", "beam",
                                                                                                  "dvts"]})}
    assert set(specs) == {"samples_N8", "beam_N1", "beam_N4", "beam_N8", "dvts_N1", "dvts_N4", "dvts_N8"}
    assert specs["samples_N8"]["overrides"]["n_samples"] == 8
    assert [specs[f"beam_N{n}"]["overrides"]["beam_width"] for n in (1, 4, 8)] == [1, 1, 2]
    assert specs["dvts_N8"]["overrides"] == {"n_samples": 8, "beam_width": 4, "k": 4}
    assert scaling_specs({"budgets": [], "width": 2, "methods": ["beam"]}) == []
    with pytest.raises(ValueError, match="scaling.methods"):
        check_scaling({"budgets": [1], "width": 2, "methods": ["mcts"]})


@pytest.fixture(scope="module")
def scaling_run(ray_session, tmp_path_factory):
    run = tmp_path_factory.mktemp("scaling")
    return evaluate(compose_config([
        "experiment=scaling", "dataset.sources=[{name: physics, limit: 2, kwargs: {n: 2, seed: 5}}]",
        f"scaling.budgets=[{','.join(map(str, BUDGETS))}]", f"scaling.width={WIDTH}", "search.max_steps=3",
        "generator.cap=12", "actors.prm.replicas=1", "pipeline.batch_size=2", f"run_dir={run}",
        f"prm.checkpoint={small_prm_checkpoint()}"]))


@pytest.mark.ray
@pytest.mark.slow
def test_two_budgets_end_to_end(scaling_run) -> None:
    rows, m = read_rows(scaling_run), read_metrics(scaling_run)
    labels = {r["method"] for r in rows}
    assert labels == {"samples_N4", "beam_N1", "beam_N4", "dvts_N1", "dvts_N4"} and not any(r["error"] for r in rows)
    curves = m["scaling"]
    assert json.loads((scaling_run / "scaling.json").read_text()) == curves
    assert list(curves["methods"]) == ["best_of_n", "weighted", "majority", "beam", "dvts"]
    assert all([p["n"] for p in pts] == list(BUDGETS) for pts in curves["methods"].values())
    # tokens: the enumerator has none, the PRM's are counted per problem, in results.parquet and metrics.json
    for r in rows:
        assert r["prompt_tokens"] == r["output_tokens"] == 0
        assert (r["prm_tokens"] > 0) == (r["prm_calls"] > 0)
    for label, d in m["methods"].items():
        mine = [r for r in rows if r["method"] == label]
        assert d["total_prm_tokens"] == sum(r["prm_tokens"] for r in mine) and d["mean_prompt_tokens"] == 0
    # the subsample at the largest N is the best_of_n run itself: same answers right, same PRM cost
    sampled = [r for r in rows if r["method"] == "samples_N4"]
    top = curves["methods"]["best_of_n"][-1]
    assert top["correct"] == sum(r["correct"] for r in sampled)
    assert top["prm_calls"] == pytest.approx(sum(r["prm_calls"] for r in sampled) / len(sampled), abs=1e-3)
    assert top["prm_tokens"] == pytest.approx(sum(r["prm_tokens"] for r in sampled) / len(sampled), abs=1e-3)
    for m_name in ("best_of_n", "weighted", "majority"):
        low, high = curves["methods"][m_name]
        assert low["prm_calls"] <= high["prm_calls"] and low["pass"] <= high["pass"]  # more samples: more of both
        assert all(p["acc"] <= p["pass"] for p in (low, high))
    # beam and DVTS at each N are their own runs; DVTS at N=4 grows N // width = 2 subtrees, at N=1 one
    for name in ("beam", "dvts"):
        for p in curves["methods"][name]:
            assert p["acc"] == m["methods"][f"{name}_N{p['n']}"]["acc"] and p["acc"] <= p["pass"]
    for r in rows:
        n_samples = len(json.loads(r["extra_json"] or "{}").get("samples") or [])
        if r["method"].startswith("dvts_"):
            assert n_samples <= max(1, int(r["method"].split("_N")[1]) // WIDTH)
    assert "Accuracy vs N" in (scaling_run / "report.html").read_text()
