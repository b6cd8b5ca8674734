"""Typed configs: every entry point's YAML fits its schema, and a misspelt, dead or mistyped key fails at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pcr_ray.configs import SCHEMAS, ConfigError, check, compose
from pcr_ray.paths import conf_dir


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_entry_point_composes_and_fits_its_schema(name: str) -> None:
    cfg = compose(name)
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


def test_a_key_the_yaml_leaves_out_is_reported() -> None:
    cfg = OmegaConf.to_container(compose("make_pairs"))
    del cfg["rel_tol"]
    with pytest.raises(ConfigError, match="rel_tol"):
        check("make_pairs", cfg)


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


def test_search_yaml_and_docs_state_the_typed_defaults() -> None:
    """`SearchConfig`'s defaults are the search defaults: conf/search/default.yaml and the table of docs/search.md
    may not state another value (the benchmarks build SearchConfig in Python and get the typed ones)."""
    import re

    import yaml

    from pcr_ray.search import SearchConfig

    typed = {f.name: f.default for f in dataclasses.fields(SearchConfig)}
    assert typed["aggregate"] == "min"
    on_file = yaml.safe_load((conf_dir() / "search" / "default.yaml").read_text())
    assert set(on_file) <= set(typed)
    assert on_file == {k: typed[k] for k in on_file}
    docs = (Path(__file__).resolve().parents[1] / "docs" / "search.md").read_text()
    table = docs[docs.index("### Settings"):docs.index("## Generators")]
    rows = dict(re.findall(r"^\| `(\w+)` \| `?([^`|]+?)`? \|", table, re.MULTILINE))
    assert len(rows) >= 10
    for key, text in rows.items():
        assert str(typed[key]).lower() == text.strip().lower(), key
