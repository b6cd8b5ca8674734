"""`pcr-ray listwise-rounds`: every command of the recipe composes with its Hydra config and chains the last
round's output into the next; finished steps are skipped; a failed step stops the recipe with its status."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pcr_ray.commands.hydra_app import compose_config
from pcr_ray.configs import compose
from pcr_ray.pipeline.eval_prm import scorer_placement
from pcr_ray.pipeline.listwise_rounds import DEFAULT_PRM, main, recipe
from pcr_ray.pipeline.recipe import RecipeStep, run_recipe

CONFIGS = {"make-pairs": "make_pairs", "train-prm": "train_prm", "mine-pairs": "mine_pairs"}


def _recipe(*overrides: str) -> list[RecipeStep]:
    """The recipe's steps for these overrides of conf/listwise_rounds.yaml (its `prm=` preset passed on)."""
    prm = next((o.split("=", 1)[1] for o in overrides if o.startswith("prm=")), DEFAULT_PRM)
    return recipe(compose("listwise_rounds", list(overrides)), prm)


def _composed(steps: list[RecipeStep]) -> list[tuple[str, dict]]:
    """(command, composed config) of each pcr-ray step, through the same compose the commands use."""
    out = []
    for step in steps:
        if "pcr_ray.cli" not in step.argv:
            continue
        i = step.argv.index("pcr_ray.cli")
        command, overrides = step.argv[i + 1], list(step.argv[i + 2:])
        out.append((command, compose_config(CONFIGS[command], overrides)))
    return out


@pytest.mark.parametrize("extra", [[], ["gpus=2", "prm=deberta_v3_base"], ["attention=pair"]])
def test_recipe_commands_compose_and_chain_each_round_into_the_next(tmp_path, extra) -> None:
    steps = _recipe(f"out={tmp_path / 'lw'}", "rounds=2", *extra)
    composed = _composed(steps)
    assert [c for c, _ in composed] == ["make-pairs", "train-prm", "mine-pairs", "train-prm", "mine-pairs", "train-prm"]
    lw = tmp_path.resolve() / "lw"
    pairs = composed[0][1]
    assert pairs["out_dir"] == str(lw / "pairs_lw") and pairs["search_per_kind"] == 8
    first = composed[1][1]
    assert first["pairs_dir"] == pairs["out_dir"] and first["train"]["loss"] == "listwise"
    assert first["output"] == str(lw / "lw1") and first["train"]["init_from"] == ""
    gpus = "gpus=2" in extra
    shared = not gpus and "attention=pair" not in extra  # MiniLM's default attention; DeBERTa's is pair
    assert first["prm"]["attention"] == ("shared_context" if shared else "pair")
    for r in (1, 2):
        mine, train = composed[2 * r][1], composed[2 * r + 1][1]
        assert mine["prm"]["attention"] == train["prm"]["attention"] == first["prm"]["attention"]
        assert mine["prm"]["checkpoint"] == str(lw / f"lw{r}")
        assert train["pairs_dir"] == mine["pairs_dir"] == str(lw / f"pairs_mlw{r}")
        assert train["train"]["init_from"] == str(lw / f"lw{r}") and train["output"] == str(lw / f"lw{r + 1}")
        assert sorted(train["kinds"]) == ["mined_alternative_step", "mined_answer_timing"] and train["limit_train"] == 0
        assert mine["sources"][0]["kwargs"]["seed"] == 7919 + 2 * (r - 1)  # new problems each round
        placement = scorer_placement(mine["prm"], mine)  # raises if the mining placement cannot work
        if gpus:
            assert mine["prm"]["backbone"] == "microsoft/deberta-v3-base" == train["prm"]["backbone"]
            assert placement.device == "cuda" and placement.gpus_per_actor == 1.0 and mine["actors"] == 2
            assert train["scaling"]["use_gpu"] is True and train["scaling"]["num_workers"] == 2
        else:
            assert placement.device == "cpu" and mine["prm"]["int8"] is True and mine["use_ray"] is False
            assert mine["prm"]["runtime"] == ("torch" if shared else "onnx")  # shared context: per-token int8
            assert train["scaling"]["use_gpu"] is False
    bench = steps[-1].argv
    assert bench[bench.index("--checkpoint") + 1] == str(lw / "lw3")
    assert ("--device" in bench) == gpus and "--fp32" not in bench  # the default scorer of each PRM
    # with GPUs the benchmark is a Ray task that reserves a GPU (the head has none), else a local process
    assert ("pcr_ray.pipeline.gpu_step" in bench) == gpus
    assert bench[bench.index("--typed-cap") + 1] == "48" == str(composed[2][1]["cap"])  # mined as searched
    assert bench[bench.index("--out") + 1] == str(lw) and steps[-1].done_when == lw / "seed13_lw3.json"


def test_the_benchmark_step_writes_the_file_that_marks_it_done(tmp_path) -> None:
    """The last step's command, run for real on 2 problems (the gold-path oracle scores, so no PRM is needed),
    writes its done_when file: a finished recipe is skipped on a rerun."""
    step = _recipe(f"out={tmp_path / 'lw'}", "rounds=0", "eval_problems=2")[-1]
    argv = list(step.argv)
    argv[argv.index("--checkpoint"):argv.index("--checkpoint") + 2] = ["--oracle"]
    if "--givens" in argv:  # the oracle scores by the gold path: gold givens (an oracle run, labelled so)
        del argv[argv.index("--givens"):argv.index("--givens") + 2]
    argv += ["--givens", "gold"]
    env = {**os.environ, "PCR_RAY_CACHE": str(tmp_path / "cache")}  # the cache copy lands in tmp too
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(step.done_when.read_text())
    assert step.done_when == tmp_path.resolve() / "lw" / "seed13_lw1.json"
    assert record["checkpoint"] == "gold_path_oracle" and record["git_revision"] and record["command"]
    assert record["datasets"]["physics"]["nsprm (typed enumerator)"]["n"] == 2


def test_finished_steps_are_skipped_on_a_rerun(tmp_path, capsys) -> None:
    steps = _recipe(f"out={tmp_path}", "rounds=1", "eval_problems=0")
    (tmp_path / "pairs_lw").mkdir()
    (tmp_path / "pairs_lw" / "summary.json").write_text("{}")
    (tmp_path / "lw1").mkdir()
    (tmp_path / "lw1" / "prm.json").write_text("{}")
    assert run_recipe(steps, dry_run=True, label="listwise-rounds") == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[listwise-rounds")]
    assert [("skipped" in ln) for ln in lines] == [True, True, False, False]
    assert not (tmp_path / "pairs_mlw1").exists()  # a dry run makes nothing


def test_a_failed_step_stops_the_recipe_with_its_status(tmp_path, capsys) -> None:
    later = tmp_path / "later.txt"
    steps = [RecipeStep("writes", (sys.executable, "-c", f"open({str(tmp_path / 'a.txt')!r}, 'w')"),
                        tmp_path / "a.txt", mkdirs=(tmp_path / "sub",)),
             RecipeStep("fails", (sys.executable, "-c", "import sys; sys.exit(3)"), tmp_path / "b.txt"),
             RecipeStep("never", (sys.executable, "-c", f"open({str(later)!r}, 'w')"), later)]
    assert run_recipe(steps) == 3
    assert (tmp_path / "a.txt").exists() and (tmp_path / "sub").is_dir() and not later.exists()
    assert "failed with exit status 3" in capsys.readouterr().err
    silent = [RecipeStep("writes nothing", (sys.executable, "-c", "pass"), tmp_path / "c.txt")]
    assert run_recipe(silent) == 1
    assert "wrote no" in capsys.readouterr().err


def test_bad_values_are_refused(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "cache"))  # Hydra's run log goes there
    assert main([f"out={tmp_path}", "rounds=-1"]) == 2
    assert "rounds must be >= 0" in capsys.readouterr().err
    assert main([f"out={tmp_path}", "attention=both"]) == 2
    assert "attention must be one of ['pair', 'shared_context']" in capsys.readouterr().err
    assert main([]) == 2  # out is required
    assert "no value for out" in capsys.readouterr().err
    assert not list(tmp_path.glob("pairs_*")), "a refused run writes nothing"
