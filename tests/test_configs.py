"""Typed configs: every entry point's YAML fits its schema, and a misspelt, dead or mistyped key fails at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pcr_ray.configs import (
    GENERATOR_SCHEMAS,
    SCHEMAS,
    ConfigError,
    DatasetConfig,
    EnumerateGeneratorConfig,
    MakePairsConfig,
    MethodConfig,
    PRMConfig,
    SearchOptions,
    SFTRecipeConfig,
    check,
    compose,
    generator_schema,
)
from pcr_ray.paths import conf_dir

# the values an entry point requires (MISSING in its schema): a composition without them is refused, naming them
REQUIRED = {"listwise_rounds": ["out=/tmp/lw"], "summarize": ["dir=/tmp/sweep"],
            "average_prm": ["checkpoints=[/tmp/a,/tmp/b]", "output=/tmp/soup"], "verify": ["traces=[/tmp/t.json]"]}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_entry_point_composes_and_fits_its_schema(name: str) -> None:
    if name in REQUIRED:
        with pytest.raises(ConfigError, match="no value for"):
            compose(name)
    cfg = compose(name, REQUIRED.get(name, []))
    top = {f.name for f in dataclasses.fields(SCHEMAS[name])}
    assert set(cfg.keys()) == top  # no key of the YAML without a field, no field without a YAML value


def test_a_misspelt_key_fails_with_its_name() -> None:
    with pytest.raises(ConfigError, match="pipeline.batch_sise"):
        compose("evaluate", values={"pipeline": {"batch_sise": 3}})
    with pytest.raises(ConfigError, match="pipelin"):
        compose("evaluate", ["+pipelin.batch_size=3"])
    with pytest.raises(ConfigError, match="limit_trian"):
        compose("train_prm", ["+limit_trian=10"])


def test_a_value_of_the_wrong_type_fails_with_its_key() -> None:
    with pytest.raises(ConfigError, match="pipeline.batch_size"):
        compose("evaluate", ["pipeline.batch_size=eight"])
    with pytest.raises(ConfigError, match="train.epochs"):
        compose("train_prm", ["train.epochs=[1,2]"])


def test_a_key_the_yaml_leaves_out_takes_the_schema_default_and_one_without_default_is_reported() -> None:
    cfg = OmegaConf.to_container(compose("make_pairs"))
    del cfg["rel_tol"]
    assert check("make_pairs", cfg).rel_tol == MakePairsConfig.rel_tol
    evaluate = OmegaConf.to_container(compose("evaluate"))
    del evaluate["generator"]
    with pytest.raises(ConfigError, match="no value for generator"):
        check("evaluate", evaluate)
    with pytest.raises(ConfigError, match="no value for generator.model"):
        check("evaluate", {**evaluate, "generator": {"kind": "hf"}})


def test_values_reach_the_config_typed() -> None:
    cfg = compose("evaluate", ["experiment=smoke"], values={"pipeline": {"batch_size": 3}})
    assert cfg.pipeline.batch_size == 3 and cfg.dataset.name == "smoke"
    assert compose("solve", ["prm.int8=true"]).prm.int8 is True


def test_a_sweep_job_folder_name_stays_short_and_distinct():
    from pcr_ray.configs import short_dirname

    overrides = ",".join(f"actors.generator.key_{i}={i}" for i in range(40))
    a, b = short_dirname(overrides), short_dirname(overrides + ",generator=vllm_tiny_half")
    assert len(a) <= 96 and len(b) <= 96 and a != b and len(a.encode()) < 255
    assert short_dirname("search.beam_width=2") == "search.beam_width=2"  # short names stay readable
    assert "/" not in short_dirname("run_dir=/tmp/x")
    raw = OmegaConf.to_container(OmegaConf.load(conf_dir() / "evaluate.yaml"), resolve=False)
    assert "${pcr_ray.dirname:${hydra.job.override_dirname}}" in raw["hydra"]["sweep"]["subdir"]


def test_search_docs_state_the_typed_defaults() -> None:
    """`SearchConfig`'s fields and defaults are `SearchOptions'`, the `search` group's schema: conf/search/default.yaml
    states none of them, and the table of docs/search.md may not state another value."""
    import re

    from pcr_ray.search import SearchConfig

    typed = {f.name: f.default for f in dataclasses.fields(SearchConfig)}
    assert typed == {"method": "nsprm", **{f.name: f.default for f in dataclasses.fields(SearchOptions)}}
    assert typed["aggregate"] == "min" and SearchConfig().aggregate == "min"
    assert not OmegaConf.load(conf_dir() / "search" / "default.yaml")  # comments only
    docs = (Path(__file__).resolve().parents[1] / "docs" / "search.md").read_text()
    table = docs[docs.index("### Settings"):docs.index("## Generators")]
    rows = dict(re.findall(r"^\| `(\w+)` \| `?([^`|]+?)`? \|", table, re.MULTILINE))
    assert len(rows) >= 10
    for key, text in rows.items():
        assert str(typed[key]).lower() == text.strip().lower(), key


def _group_schema(group: str, option: str) -> type:
    if group == "generator":
        return generator_schema(compose("evaluate", [f"generator={option}"]).generator.kind)
    return {"prm": PRMConfig, "dataset": DatasetConfig, "search": SearchOptions, "sft_recipe": SFTRecipeConfig,
            "method": MethodConfig}[group]


def test_the_yaml_states_no_default_the_schema_states() -> None:
    """Each default is stated once, in pcr_ray/configs.py: an entry point's YAML and a group preset that has no
    other preset as its parent state no key at the schema's default value (experiments are presets: not checked)."""
    restated = []
    for name, schema in SCHEMAS.items():
        raw = OmegaConf.to_container(OmegaConf.load(conf_dir() / f"{name}.yaml"), resolve=False)
        defaults = OmegaConf.to_container(OmegaConf.structured(schema), resolve=False)
        restated += [f"{name}.yaml: {k}" for k in _restated_plain(raw, defaults)]
    for group in ("prm", "dataset", "search", "sft_recipe", "method", "generator"):
        for path in sorted((conf_dir() / group).glob("*.yaml")):
            raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
            parents = [d for d in raw.get("defaults", []) if d not in ("_self_",) and not str(d).endswith("_schema")]
            if parents:
                continue
            defaults = OmegaConf.to_container(OmegaConf.structured(_group_schema(group, path.stem)), resolve=False)
            restated += [f"{group}/{path.name}: {k}" for k in _restated_plain(raw, defaults)]
    assert not restated, restated


def _restated_plain(raw: dict, defaults: dict, path: str = "") -> list[str]:
    out = []
    for key, value in raw.items():
        if key in ("defaults", "hydra") or key not in defaults or defaults[key] == "???":
            continue
        if isinstance(value, dict) and isinstance(defaults[key], dict) and value:
            out += _restated_plain(value, defaults[key], f"{path}{key}.")
        elif value == defaults[key]:
            out.append(f"{path}{key}")
    return out


def test_every_composition_keeps_its_values_typed() -> None:
    """Every entry point, every experiment and every group preset composes and checks; each generator is typed by
    its kind's schema (every key of that kind present)."""
    names = [(n, REQUIRED.get(n, [])) for n in SCHEMAS]
    names += [("evaluate", [f"experiment={p.stem}"]) for p in sorted((conf_dir() / "experiment").glob("*.yaml"))]
    names += [("solve", [f"generator={p.stem}"]) for p in sorted((conf_dir() / "generator").glob("*.yaml"))]
    names += [("solve", [f"method={p.stem}"]) for p in sorted((conf_dir() / "method").glob("*.yaml"))]
    names += [("serve", [f"prm={p.stem}"]) for p in sorted((conf_dir() / "prm").glob("*.yaml"))]
    names += [("sft", [f"sft_recipe={p.stem}"]) for p in sorted((conf_dir() / "sft_recipe").glob("*.yaml"))]
    for name, overrides in names:
        cfg = compose(name, overrides)
        if name not in ("evaluate", "solve"):
            continue
        for gen in [cfg.get("generator"), *(cfg.get("generators") or {}).values()]:
            if gen is not None:
                assert set(gen) == {f.name for f in dataclasses.fields(generator_schema(gen.kind))}, (name, overrides)


def test_a_generator_key_of_another_kind_fails_naming_the_key_and_the_kind() -> None:
    with pytest.raises(ConfigError, match=r"'cap'.*generator kind 'vllm'"):
        compose("evaluate", ["generator=vllm_tiny", "+generator.cap=3"])
    with pytest.raises(ConfigError, match=r"generators.llm.*'cap'.*generator kind 'llamacpp'"):
        compose("evaluate", ["experiment=demo"], values={"generators": {"llm": {"cap": 3}}})
    with pytest.raises(ConfigError, match=r"givens.generator.*'typed'.*generator kind 'llamacpp'"):
        compose("solve", values={"givens": {"generator": {"typed": False}}})
    with pytest.raises(ConfigError, match="unknown generator kind 'gpt'"):
        compose("solve", ["generator.kind=gpt"])
    assert compose("solve", values={"givens": {"generator": {"kind": "vllm"}}}).givens.generator.max_ops == 48


def test_a_method_override_may_set_only_the_options_of_its_method() -> None:
    compose("evaluate", values={"method_overrides": {"best_of_n": {"n_samples": 4}}})
    with pytest.raises(ConfigError, match=r"method_overrides.nsprm.*'n_samples'.*method 'nsprm'"):
        compose("evaluate", values={"method_overrides": {"nsprm": {"n_samples": 4}}})
    with pytest.raises(ConfigError, match=r"method.search.*'beam_width'.*method 'best_of_n'"):
        compose("solve", ["method=best_of_n", "+method.search.beam_width=2"])
    with pytest.raises(ConfigError, match=r"search_source_overrides.physics.*'aggregate'"):
        compose("evaluate", ["+search_source_overrides.physics.aggregate=[1]"])
    with pytest.raises(ConfigError, match="generator_source_overrides.gsm8k.*'opz'"):
        compose("evaluate", values={"generator_source_overrides": {"gsm8k": {"opz": ["add"]}}})


def test_each_generator_schema_states_its_backends_defaults() -> None:
    """The backends' constructors take what the schema of their kind states, at the same defaults."""
    import inspect

    from pcr_ray.generators.enumerate import EnumeratorGenerator
    from pcr_ray.generators.hf import HFGenerator
    from pcr_ray.generators.llamacpp import LlamaCppGenerator
    from pcr_ray.generators.vllm import VLLMGenerator

    for kind, cls in {"llamacpp": LlamaCppGenerator, "vllm": VLLMGenerator, "hf": HFGenerator}.items():
        params = {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items() if n != "self"}
        schema = {f.name: f.default for f in dataclasses.fields(GENERATOR_SCHEMAS[kind]) if f.name != "kind"}
        assert set(schema) == set(params), kind
        for key, default in schema.items():
            assert default == "???" and params[key] is inspect.Parameter.empty or default == params[key], (kind, key)
    enum = {f.name: f.default for f in dataclasses.fields(EnumeratorGenerator) if f.name not in ("uses_feedback",
                                                                                                 "stats")}
    schema = OmegaConf.to_container(OmegaConf.structured(EnumerateGeneratorConfig))
    del schema["kind"]
    assert {k: (list(v) if isinstance(v, tuple) else v) for k, v in enum.items()} == schema


def test_conf_dir_is_the_installed_copy_else_the_checkouts(tmp_path, monkeypatch) -> None:
    import pcr_ray.paths as paths

    monkeypatch.delenv("PCR_RAY_CONF", raising=False)
    pkg = tmp_path / "pcr_ray"
    (pkg / "conf" / "dataset").mkdir(parents=True)  # a leftover folder without the configs
    (tmp_path / "conf").mkdir()
    monkeypatch.setattr(paths, "PACKAGE_DIR", pkg)
    assert paths.conf_dir() == (tmp_path / "conf").resolve()
    (pkg / "conf" / "evaluate.yaml").write_text("{}\n")  # an installed wheel's copy
    assert paths.conf_dir() == (pkg / "conf").resolve()
    monkeypatch.setenv("PCR_RAY_CONF", str(tmp_path / "mine"))
    assert paths.conf_dir() == (tmp_path / "mine").resolve()
