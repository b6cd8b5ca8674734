"""`pcr-ray reproduce`: the steps of both scales compose, dry_run=true prints them, and a tiny real run reports."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pcr_ray.configs import compose
from pcr_ray.pipeline import reproduce
from tests.pipeline_util import tiny_checkpoint

REPO = Path(__file__).resolve().parent.parent


def _steps(*overrides: str):
    cfg = compose("reproduce", list(overrides))
    if cfg.scale == "paper":
        cfg.checkpoint_csp, cfg.checkpoint_random = "/ck/deberta_csp", "/ck/deberta_random"
    return reproduce.recipe(reproduce.options(cfg))


@pytest.mark.parametrize("scale", ["cpu", "paper"])
def test_every_evaluate_step_composes_and_builds_its_search_configs(scale, tmp_path):
    from pcr_ray.evaluate import compose_config
    from pcr_ray.pipeline.search_batch import check_search_configs, parse_methods

    steps = _steps(f"scale={scale}", f"out={tmp_path}")
    names = [s.name for s in steps]
    assert {"table", "csp_ablation_csp", "csp_ablation_random", "coverage_0.5", "coverage_1.0", "conditions",
            "pairs", "eval_prm_csp", "eval_prm_random", "first_error", "givens"} <= set(names)
    assert ("table_sft" in names) == (scale == "cpu")
    for s in steps:
        assert str(tmp_path) in str(s.done_when) or scale == "paper"
        argv = list(s.argv)
        if "evaluate" not in argv:
            continue
        cfg = compose_config(argv[argv.index("evaluate") + 1:])
        assert cfg.pipeline.givens == "extract", s.name  # no reproduced figure searches from oracle givens
        check_search_configs(parse_methods(list(cfg.methods)), dict(cfg.search))
        if s.name == "coverage_0.5":
            assert cfg.search.verifier_coverage == 0.5
            if scale == "cpu":
                assert cfg.generator.verifier_coverage == 0.5
        if s.name == "conditions":  # generated physics problems that state a condition (the assumption row)
            assert [(d["name"], d["kwargs"]["mix"]) for d in cfg.dataset.sources] == [("physics", "assumption")]
            assert list(cfg.methods) == ["nsprm", "prm_only"]
        if scale == "paper":
            assert cfg.generator.kind == "vllm" and cfg.search.beam_width == 8
            if s.name != "conditions":
                assert {s["name"] for s in cfg.dataset.sources} == {"gsm8k_test", "math500"}


def test_dry_run_prints_every_step_and_runs_nothing(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pcr_ray.cli", "reproduce", "dry_run=true", f"out={tmp_path}"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for s in _steps(f"out={tmp_path}"):
        assert s.shell() in out.stdout
    assert not list(tmp_path.iterdir()), "a dry run writes nothing"


def test_help():
    out = subprocess.run([sys.executable, "-m", "pcr_ray.cli", "reproduce", "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "scale: cpu" in out.stdout and "dry_run: false" in out.stdout


@pytest.mark.slow
def test_a_tiny_real_run_writes_the_report_and_a_rerun_skips_every_step(tmp_path):
    # three of the steps, for time: the ablation steps are plain evaluate runs, which test_experiments runs
    cks = {k: tiny_checkpoint(tmp_path / f"prm_{k}", k) for k in ("csp", "random")}
    ran = ("table", "first_error", "givens")
    argv = ["reproduce", f"out={tmp_path / 'run'}", "problems=1", "methods=[nsprm]",
            f"checkpoint_csp={cks['csp']}", f"checkpoint_random={cks['random']}", f"steps=[{','.join(ran)}]"]
    first = subprocess.run([sys.executable, "-m", "pcr_ray.cli", *argv], cwd=REPO, capture_output=True, text=True,
                           timeout=1500)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    run = tmp_path / "run"
    rep = json.loads((run / "reproduction.json").read_text())
    assert {n for n, s in rep["steps"].items() if s["done"]} == set(ran)
    rows = [r for c in rep["claims"] for r in c["rows"]]
    labels = {r["label"] for r in rows}
    for want in ("Table 1 Acc@1, NS-PRM, physics, unseen templates", "first-error benchmark F1, verifier+prm",
                 "SciBench physics: problems with givens extracted"):
        assert want in labels, sorted(labels)
    assert any(r["ours"] is None and r["step"] == "coverage_1.0" for r in rows)  # not run: reported as not measured
    for r in rows:
        if r["k"] is not None and r["n"]:
            lo, hi = r["ci95"]
            assert lo <= r["ours"] <= hi and r["n"] > 0
    md = (run / "reproduction.md").read_text()
    assert "| claim | measurement | paper | ours | n | 95% CI | how | step |" in md
    for s in rep["steps"].values():
        assert f"`{s['command']}`" in md
        assert shlex.split(s["command"])  # a command one can paste
    again = subprocess.run([sys.executable, "-m", "pcr_ray.cli", *argv], cwd=REPO, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0 and again.stdout.count("skipped") == len(ran)
    bad = subprocess.run([sys.executable, "-m", "pcr_ray.cli", "reproduce", f"out={run}", "steps=[tabel]"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "unknown step(s) ['tabel']" in bad.stderr


def test_a_row_of_a_step_run_on_gold_givens_is_labelled_oracle(tmp_path):
    from pcr_ray.pipeline.metrics import compute_metrics

    rows = [{"problem_id": f"p{i}", "method": m, "correct": i % 2 == 0, "answered": True, "horizon": "short",
             "source": "physics"} for i in range(4) for m in ("nsprm", "prm_only")]
    for step, givens in (("csp_ablation_csp", "gold"), ("csp_ablation_random", "extract")):
        (tmp_path / step).mkdir()
        (tmp_path / step / "metrics.json").write_text(json.dumps(compute_metrics(rows, None, {"givens": givens})))
    args = reproduce.options(compose("reproduce", [f"out={tmp_path}"]))
    result = reproduce.report(tmp_path, reproduce.recipe(args), args)
    rows = {r["step"]: r for c in result["claims"] for r in c["rows"] if r["label"].startswith("search Acc@1")}
    assert rows["csp_ablation_csp"]["label"].endswith("(oracle givens)")
    assert "oracle" not in rows["csp_ablation_random"]["label"]
    assert result["steps"]["csp_ablation_csp"]["givens"] == "gold" and result["steps"]["table"]["givens"] is None
    md = (tmp_path / "reproduction.md").read_text()
    assert "negatives (oracle givens) |" in md and "**csp_ablation_csp** (done, oracle givens)" in md


def test_table_claims_report_generated_physics_by_template_split():
    from pcr_ray.pipeline.metrics import compute_metrics

    rows = [{"problem_id": f"p{i}", "method": "nsprm", "source": "physics", "correct": i < 3,
             "template_split": "heldout" if i < 4 else "train"} for i in range(6)]
    rows.append({"problem_id": "g", "method": "nsprm", "source": "gsm8k_test", "correct": True})
    got = {r["label"]: (r["k"], r["n"]) for r in reproduce.table_claims(compute_metrics(rows), "cpu")}
    assert got == {"Table 1 Acc@1, NS-PRM, gsm8k_test": (1, 1), "Table 1 Acc@1, NS-PRM, physics, unseen templates":
                   (3, 4), "Table 1 Acc@1, NS-PRM, physics, seen templates": (0, 2)}
    unsplit = reproduce.table_claims(compute_metrics([{**r, "template_split": ""} for r in rows]), "cpu")
    assert {r["label"]: (r["k"], r["n"]) for r in unsplit}["Table 1 Acc@1, NS-PRM, physics"] == (3, 6)
