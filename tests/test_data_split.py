"""Generated physics' template split: the held-out families are disjoint from the training ones, and no config that
evaluates draws a template that any config or recipe that trains draws (by template id, whatever the seeds)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from pcr_ray.commands.hydra_app import compose_config
from pcr_ray.configs import compose
from pcr_ray.data.physics import (
    HELDOUT_TEMPLATES,
    HELDOUT_TOPICS,
    SPLITS,
    TEMPLATES,
    TOPICS,
    generate_problems,
    mix_templates,
    split_templates,
    template_split,
)
from pcr_ray.paths import conf_dir

# --------------------------------------------------------------------------------------------- the split itself


def test_the_splits_are_disjoint_and_cover_every_template() -> None:
    train = {t.name for t in split_templates("train")}
    held = {t.name for t in split_templates("heldout")}
    assert train and held and not train & held
    assert train | held == {t.name for t in split_templates("all")} == {t.name for t in TEMPLATES}
    assert HELDOUT_TEMPLATES <= {t.name for t in TEMPLATES}  # no stale name in the definition
    assert all(template_split(t.name) in ("train", "heldout") for t in TEMPLATES)


def test_held_out_topics_are_wholly_out_of_train_and_every_other_topic_has_both_sides() -> None:
    assert HELDOUT_TOPICS and HELDOUT_TOPICS <= set(TOPICS)
    for topic in TOPICS:
        sides = {template_split(t.name) for t in TEMPLATES if t.topic == topic}
        assert sides == ({"heldout"} if topic in HELDOUT_TOPICS else {"train", "heldout"}), topic


@pytest.mark.parametrize("mix", ["core", "assumption"])
def test_every_mix_has_templates_on_both_sides(mix: str) -> None:
    sides = {template_split(t.name) for t in mix_templates(mix)}
    assert sides == {"train", "heldout"}
    # a condition held out wholly: some stated condition no training template states
    if mix == "assumption":
        trained = {c for t in split_templates("train") for c in t.assumptions}
        assert {c for t in split_templates("heldout") for c in t.assumptions} - trained


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_generated_problems_record_their_template_and_split(split: str) -> None:
    probs = generate_problems(150, seed=3, mix="all", split=split)
    names = {t.name for t in split_templates(split)}
    assert {p.gold_trace["meta"]["template"] for p in probs} == names  # cycles through every one of them
    for p in probs:
        meta = p.gold_trace["meta"]
        assert meta["template_split"] == split and p.id.rsplit("/", 1)[1] == meta["template"]


def test_split_all_is_the_unsplit_generator() -> None:
    """A direct call without split draws every template of the mix, in the order it always did."""
    default = generate_problems(80, seed=0)
    assert [p.id for p in default] == [p.id for p in generate_problems(80, seed=0, split="all")]
    assert {p.gold_trace["meta"]["template_split"] for p in default} == {"train", "heldout"}
    heldout = {p.id: p for p in generate_problems(80, seed=0, split="heldout")}
    same = [p for p in default if p.id in heldout]  # an id names the same problem whatever the split drawn
    assert all(p.text == heldout[p.id].text for p in same)


def test_an_unknown_split_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="train, heldout, all"):
        generate_problems(3, split="test")
    assert SPLITS == ("train", "heldout", "all")


# --------------------------------------------------------------------------------------------- every config


def _templates(sources: Iterable[Mapping[str, Any]], where: str, split: str) -> set[str]:
    """The template ids the physics sources draw; each must state `split` (no config leans on the default)."""
    out: set[str] = set()
    for src in sources:
        if src.get("name") != "physics":
            continue
        kw = dict(src.get("kwargs") or {})
        assert kw.get("split") == split, f"{where}: physics source {src} must state split: {split}"
        n = min(int(kw.get("n", 400)), int(src.get("limit") or 10**9))
        kw["n"] = min(n, len(TEMPLATES))  # problems cycle through their templates: the first len() name them all
        out |= {p.gold_trace["meta"]["template"] for p in generate_problems(**kw)}
    return out


STEP_CONFIGS = {"evaluate": "evaluate", "make-pairs": "make_pairs", "mine-pairs": "mine_pairs"}


def _step_config(step: Any) -> tuple[str, dict[str, Any]]:
    """(command, composed config) of a recipe step that runs a pcr-ray command of STEP_CONFIGS; ('', {}) else."""
    argv = list(step.argv)
    if "pcr_ray.cli" not in argv or argv[argv.index("pcr_ray.cli") + 1] not in STEP_CONFIGS:
        return "", {}
    i = argv.index("pcr_ray.cli")
    return argv[i + 1], compose_config(STEP_CONFIGS[argv[i + 1]], argv[i + 2:])


def evaluation_templates() -> dict[str, set[str]]:
    """Where each evaluation draws generated physics from: every data set and experiment preset, and the
    reproduction's evaluate steps and eval-prm pairs."""
    from pcr_ray.pipeline import reproduce

    out: dict[str, set[str]] = {}
    for group in ("dataset", "experiment"):
        for path in sorted((conf_dir() / group).glob("*.yaml")):
            cfg = compose_config("evaluate", [f"{group}={path.stem}"])
            out[f"{group}={path.stem}"] = _templates(cfg["dataset"]["sources"], f"conf/{group}/{path.name}",
                                                     "heldout")
    for scale in ("cpu", "paper"):
        cfg = compose("reproduce", [f"scale={scale}"])
        if scale == "paper":
            cfg.checkpoint_csp, cfg.checkpoint_random = "/ck/csp", "/ck/random"
        for step in reproduce.recipe(reproduce.options(cfg)):
            command, c = _step_config(step)
            if command == "evaluate":
                srcs = c["dataset"]["sources"]
            elif command == "make-pairs" and step.name == "pairs":  # eval-prm's pairs (it scores their test split)
                srcs = c["sources"]
            else:
                continue
            out[f"reproduce {scale} {step.name}"] = _templates(srcs, f"reproduce {scale} {step.name}", "heldout")
    return out


def training_templates() -> dict[str, set[str]]:
    """Where everything that learns draws generated physics from: make-pairs' and mine-pairs' configs, the quick
    PRM's sources, every SFT recipe's corpus, and the listwise recipe's make-pairs and mining rounds."""
    from pcr_ray.pipeline.listwise_rounds import DEFAULT_PRM, recipe
    from pcr_ray.prm.checkpoints import DEFAULT_SOURCES
    from pcr_ray.sft.corpus import training_problems

    out: dict[str, set[str]] = {}
    for name in ("make_pairs", "mine_pairs"):
        out[name] = _templates(compose_config(name)["sources"], f"conf/{name}.yaml", "train")
    out["quick PRM"] = _templates(DEFAULT_SOURCES, "pcr_ray.prm.checkpoints.DEFAULT_SOURCES", "train")
    for path in sorted((conf_dir() / "sft_recipe").glob("*.yaml")):
        r = compose("sft", [f"sft_recipe={path.stem}"]).sft_recipe
        probs = [p for p in training_problems(min(r.physics_problems, len(TEMPLATES)), r.physics_seed, 0, None,
                                              r.physics_mix) if p.source == "physics"]
        out[f"sft_recipe={path.stem}"] = {p.gold_trace["meta"]["template"] for p in probs}
        assert {p.gold_trace["meta"]["template_split"] for p in probs} == {"train"}, path.name
    for extra in ([], ["pairs_physics=500"]):
        for step in recipe(compose("listwise_rounds", ["out=/tmp/lw", *extra]), DEFAULT_PRM):
            command, c = _step_config(step)
            if command in ("make-pairs", "mine-pairs"):
                out[f"listwise-rounds {extra} {step.name}"] = _templates(c["sources"], f"listwise {step.name}", "train")
    return out


def test_no_evaluated_template_is_in_any_training_set() -> None:
    evaluated, trained = evaluation_templates(), training_templates()
    assert evaluated["dataset=physics"] and trained["make_pairs"] and trained["sft_recipe=tiny"]
    assert any(k.startswith("reproduce cpu") for k in evaluated) and any(k.startswith("listwise") for k in trained)
    seen = set().union(*trained.values())
    for where, names in evaluated.items():
        assert not names & seen, f"{where} evaluates templates that training draws: {sorted(names & seen)}"


def test_the_data_build_writes_held_out_templates_by_default() -> None:
    assert compose("data").physics.split == "heldout"


def test_a_config_source_without_a_split_is_caught() -> None:
    with pytest.raises(AssertionError, match="must state split: heldout"):
        _templates([{"name": "physics", "kwargs": {"n": 5, "seed": 0}}], "a config", "heldout")
