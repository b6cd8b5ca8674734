"""The registries of the extension points: names come from them alone (configs and docs agree), unknown names fail
with the known ones listed, and a strategy or backend registered in-process runs through `solve` unchanged."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from pcr_ray.baselines import BASELINES, run_baseline
from pcr_ray.data import DATA_SOURCES, load_dataset
from pcr_ray.generators import GENERATORS, GeneratorBackend, backend_of, build_generator
from pcr_ray.generators.base import GeneratorStats, ProposalRequest
from pcr_ray.pipeline.search_batch import parse_methods
from pcr_ray.prm.build import SCORERS, build_scorer
from pcr_ray.registry import Registry, UnknownNameError
from pcr_ray.search import STRATEGIES, SearchConfig, search_strategy
from pcr_ray.search.beam import run_beam_search
from pcr_ray.solve import compose, solve

ROOT = Path(__file__).resolve().parent.parent
CAR = "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"


def _ticked(text: str) -> list[str]:
    return re.findall(r"`([a-z0-9_]+)`", text)


def _table_names(doc: str, header_start: str) -> list[str]:
    """The backticked names in the first column of the markdown table whose header row starts with header_start."""
    lines = (ROOT / "docs" / doc).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    names = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        names += _ticked(line.split("|")[1])
    return names


# ---------------------------------------------------------------- the Registry itself

def test_registry_aliases_duplicates_and_unknown_names() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("one", "uno")(1)
    reg.add("two", 2)
    assert reg.names() == ("one", "two") and reg.get("uno") == 1 and reg.canonical("uno") == "one"
    assert "uno" in reg and "three" not in reg and reg.all_names() == ("one", "two", "uno")
    with pytest.raises(ValueError, match="widget 'uno' is registered already"):
        reg.add("uno", 3)
    with pytest.raises(UnknownNameError, match=r"unknown widget 'three'; known: one, two, uno"):
        reg.get("three")
    reg.remove("one")
    assert reg.names() == ("two",) and "uno" not in reg


@pytest.mark.parametrize("call, known", [
    (lambda: SearchConfig(method="beem"), "nsprm, prm_only, verifier_only, greedy, best_of_n, dvts"),
    (lambda: build_generator({"kind": "llama"}), "enumerate"),
    (lambda: run_baseline("directt", [], None), "direct, pyexec"),
    (lambda: load_dataset("gsm8k"), "gsm8k_train, gsm8k_test"),
    (lambda: build_scorer({"family": "cross"}), "cross_encoder, causal_lm"),
    (lambda: parse_methods(["nsprn"]), "nsprm"),
])
def test_an_unknown_name_lists_the_known_ones(call: Any, known: str) -> None:
    with pytest.raises(ValueError, match=re.escape(known)):
        call()


# ---------------------------------------------------------------- names in configs and docs come from the registries

def test_method_configs_and_the_docs_table_list_the_registered_methods() -> None:
    registered = set(STRATEGIES.names()) | set(BASELINES.names())
    presets = {p.stem: yaml.safe_load(p.read_text())["name"] for p in (ROOT / "conf" / "method").glob("*.yaml")}
    assert all(stem == name for stem, name in presets.items()), presets
    assert set(presets.values()) == registered
    assert set(_table_names("search.md", "| method |")) == registered


def test_generator_presets_and_docs_name_registered_kinds() -> None:
    kinds = {p.stem: compose([f"generator={p.stem}"])["generator"]["kind"]
             for p in sorted((ROOT / "conf" / "generator").glob("*.yaml"))}
    assert all(k in GENERATORS for k in kinds.values()), kinds
    assert {GENERATORS.canonical(k) for k in kinds.values()} == set(GENERATORS.names())  # a preset per backend
    text = (ROOT / "docs" / "search.md").read_text()
    paragraph = text[text.index("A generator config's `kind`"):].split("\n\n")[0].split(";")[0]
    assert set(_ticked(paragraph)) == set(GENERATORS.all_names()) | {"kind"}
    assert {"enumerator": "enumerate", "llama_cpp": "llamacpp", "smollm2": "llamacpp"}.items() <= \
        GENERATORS.aliases().items()


def test_prm_presets_name_registered_families() -> None:
    from pcr_ray.configs import PRMConfig

    families = {(yaml.safe_load(p.read_text()) or {}).get("family") for p in (ROOT / "conf" / "prm").glob("*.yaml")}
    families.discard(None)  # a preset that inherits its family from another, or the schema's default
    assert families | {PRMConfig.family} == set(SCORERS.names())


def test_the_data_docs_list_the_registered_sources() -> None:
    documented = set(_table_names("data.md", "| data set (`datasets=`"))
    data_md = (ROOT / "docs" / "data.md").read_text()
    documented |= {n for n in DATA_SOURCES.names() if f"`name: {n}`" in data_md}
    assert documented == set(DATA_SOURCES.names())


def test_strategy_flags_are_the_methods_own() -> None:
    assert [n for n in STRATEGIES.names() if not STRATEGIES.get(n).uses_prm] == ["verifier_only"]
    assert [n for n in STRATEGIES.names() if not STRATEGIES.get(n).uses_verifier] == ["prm_only"]
    assert SearchConfig(method="greedy", beam_width=4).beam_width == 1
    assert [n for n in GENERATORS.names() if GENERATORS.get(n).model_free] == ["enumerate", "openai"]
    assert [n for n in GENERATORS.names() if GENERATORS.get(n).async_engine] == ["vllm"]


def test_registering_pulls_in_neither_ray_nor_torch() -> None:
    code = ("import sys, pcr_ray.search, pcr_ray.generators, pcr_ray.baselines, pcr_ray.data, pcr_ray.prm.build\n"
            "print(sorted(m for m in ('ray', 'torch', 'transformers', 'vllm', 'llama_cpp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", out.stderr


# ---------------------------------------------------------------- a new strategy and a new backend, in-process

@pytest.fixture()
def toy_strategy() -> Iterator[str]:
    """A strategy of its own: the verifier-only beam search, widened to 16 beams (registered for this test)."""

    @search_strategy("toy_wide", uses_prm=False)
    def run_toy(problems: list[Any], generator: Any, scorer: Any, cfg: SearchConfig) -> list[Any]:
        return run_beam_search(problems, generator, scorer, replace(cfg, beam_width=16))

    yield "toy_wide"
    STRATEGIES.remove("toy_wide")


class ToyBackend:
    """A backend of its own: replays the enumerator's candidates, counting calls (registered for the test)."""

    model_free = True
    async_engine = False
    uses_feedback = False

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.stats = GeneratorStats()

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ToyBackend:
        return cls(build_generator({"kind": "enumerate", **dict(cfg)}))

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "toy_replay", "inner": dict(self.inner.identity)}

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        self.stats.calls += 1
        self.stats.requests += len(requests)
        return self.inner.propose(requests)


@pytest.fixture()
def toy_backend() -> Iterator[str]:
    GENERATORS.register("toy_replay", "toy_alias")(ToyBackend)
    yield "toy_alias"
    GENERATORS.remove("toy_replay")


def test_a_registered_strategy_runs_through_solve_and_the_pipeline_checks(toy_strategy: str) -> None:
    cfg = compose(["method=verifier_only"])
    cfg["method"] = {"name": toy_strategy, "search": {}}
    res, report = solve(CAR, cfg)
    assert res.method == toy_strategy and res.answer_value == pytest.approx(25.0) and res.answer_unit == "m"
    assert f"method: {toy_strategy}" in report
    spec = parse_methods([toy_strategy])[0]
    assert not spec.is_baseline and not spec.uses_prm


def test_a_registered_backend_is_built_by_kind_or_alias_and_solves(toy_backend: str) -> None:
    gen = build_generator({"kind": toy_backend, "cap": 64})
    assert isinstance(gen, ToyBackend) and isinstance(gen, GeneratorBackend)
    assert backend_of({"kind": toy_backend}).model_free
    cfg = compose(["method=verifier_only"])
    res, _ = solve(CAR, {**cfg, "generator": {"kind": toy_backend, "cap": 64}})  # solve builds it from the config
    assert res.answer_value == pytest.approx(25.0) and res.n_proposed > 0


def test_a_registered_data_source_is_read_by_name_and_checked_for_its_files(tmp_path: Path) -> None:
    from pcr_ray.data.problem import Problem
    from pcr_ray.data.readers import data_present, missing_data_hint
    from pcr_ray.data.sources import data_source

    @data_source("toy_source", files="toy/*.txt")
    def iter_toy(data_dir: Any = None, n: int = 2) -> Iterator[Problem]:
        for i in range(n):
            yield Problem(id=f"toy/{i}", source="toy", text=f"What is {i} + 1?", answer=str(i + 1))

    try:
        assert [p.answer for p in load_dataset("toy_source", tmp_path, n=3)] == ["1", "2", "3"]
        assert not data_present("toy_source", tmp_path) and "toy/*.txt" in missing_data_hint("toy_source", tmp_path)
        (tmp_path / "toy").mkdir()
        (tmp_path / "toy" / "a.txt").write_text("x")
        assert data_present("toy_source", tmp_path)
    finally:
        DATA_SOURCES.remove("toy_source")
