"""No key is read that the schema lacks: the code that takes a checked config reads only keys its schema states.

Two checks. Statically, every literal key read off a config variable (`cfg["k"]`, `cfg.get("k")`, `cfg.k.j`, chains
included) in pcr_ray/ is a field of that variable's schema (by file and variable name, below). Dynamically, the
plan of every composed experiment (pcr_ray.pipeline.plan.pools: generators, PRMs, actors, search workers) runs on
the checked config wrapped in a mapping that records reads of absent keys.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pcr_ray import configs as C
from pcr_ray.configs import GENERATOR_SCHEMAS, SCHEMAS, compose, to_plain
from pcr_ray.paths import conf_dir

PKG = Path(__file__).resolve().parents[1] / "pcr_ray"


class AnyOf:
    """Several schemas: a key is known when one of them states it (a generator config of any kind)."""

    def __init__(self, *schemas: type) -> None:
        self.schemas = schemas


GENERATOR = AnyOf(*GENERATOR_SCHEMAS.values())
# variable name -> its schema, anywhere in pcr_ray/
BY_VARIABLE: dict[str, Any] = {
    "acfg": C.GeneratorActorConfig, "pcfg": C.PipelineConfig, "gen_cfg": GENERATOR, "prm_cfg": C.PRMConfig,
    "dcfg": C.DatasetConfig,
}
# (file, variable) -> its schema: the entry points' checked configs
BY_FILE: dict[tuple[str, str], Any] = {
    ("evaluate.py", "cfg"): C.EvaluateConfig, ("evaluate.py", "acfg"): C.ActorsConfig,
    ("solve.py", "cfg"): C.SolveConfig,
    ("pipeline/plan.py", "cfg"): C.EvaluateConfig, ("pipeline/train_prm.py", "cfg"): C.TrainPRMConfig,
    ("pipeline/eval_prm.py", "cfg"): C.EvalPRMConfig, ("pipeline/mine_pairs.py", "cfg"): C.MinePairsConfig,
    ("pipeline/make_pairs.py", "cfg"): C.MakePairsConfig, ("data/build.py", "cfg"): C.DataBuildConfig,
    ("sft/command.py", "cfg"): C.SFTConfig, ("pipeline/scaling.py", "scfg"): C.ScalingSweepConfig,
    ("pipeline/ray_runtime.py", "rcfg"): C.EvaluateRayConfig, ("pipeline/actors.py", "gen_cfg"): GENERATOR,
    ("solve.py", "ex_cfg"): C.GivensConfig, ("solve.py", "method"): C.MethodConfig,
    ("generators/givens_llm.py", "cfg"): C.GivensConfig,
    ("pipeline/reproduce.py", "args"): C.ReproduceConfig, ("pipeline/summarize.py", "cfg"): C.SummarizeConfig,
    ("pipeline/listwise_rounds.py", "args"): C.ListwiseRoundsConfig,
    ("pipeline/listwise_rounds.py", "cfg"): C.ListwiseRoundsConfig, ("prm/average.py", "cfg"): C.AveragePRMConfig,
    ("commands/core.py", "verify_cfg"): C.VerifyConfig, ("commands/core.py", "schema_cfg"): C.SchemaConfig,
    ("commands/core.py", "primitives_cfg"): C.PrimitivesConfig,
}
METHODS = {"get", "items", "keys", "values", "pop", "setdefault", "copy", "update"}


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """(root variable, literal keys) of `v["a"].b.get("c")`-like reads; None for anything else."""
    keys: list[str] = []
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            keys.append(node.args[0].value)
            node = node.func.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            keys.append(node.slice.value)
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr not in METHODS and not node.attr.startswith("_"):
            keys.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id, keys[::-1]
        else:
            return None


def _unknown(schema: Any, keys: list[str]) -> str | None:
    """The first key of `keys` the schema lacks (descending into nested dataclasses), or None."""
    if isinstance(schema, AnyOf):
        found = [_unknown(s, keys) for s in schema.schemas]
        return None if None in found else found[0]
    for i, key in enumerate(keys):
        hints = typing.get_type_hints(schema)
        if key not in hints:
            return ".".join(keys[:i + 1])
        by_kind = {f.name: f.metadata.get("schema_by_kind") for f in dataclasses.fields(schema)}[key]
        if by_kind:  # a generator config: the rest of the keys by the schemas of its kinds
            rest = _unknown(AnyOf(*by_kind.values()), keys[i + 1:])
            return None if rest is None else ".".join([*keys[:i + 1], rest])
        nested = hints[key]
        if not (isinstance(nested, type) and dataclasses.is_dataclass(nested)):
            return None  # a free-form value (dict, list, Any) or a leaf
        schema = nested
    return None


def _reads() -> Iterator[tuple[str, int, str, Any, list[str]]]:
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            found = _chain(node)
            if not found or not found[1]:
                continue
            var, keys = found
            schema = BY_FILE.get((rel, var)) or BY_VARIABLE.get(var)
            if schema is not None:
                yield rel, node.lineno, var, schema, keys


def test_no_key_is_read_that_the_schema_lacks_in_the_source() -> None:
    reads = list(_reads())
    assert len(reads) > 100  # the scan sees the reads (a broken scan would pass vacuously)
    bad = sorted({f"pcr_ray/{rel}:{line}: {var}.{'.'.join(keys)} ({_unknown(schema, keys)!r} not in the schema)"
                  for rel, line, var, schema, keys in reads if _unknown(schema, keys)})
    assert not bad, "\n".join(bad)


def test_the_source_scan_finds_a_key_the_schema_lacks() -> None:
    assert _unknown(C.GeneratorActorConfig, ["placement_timeout_s"]) == "placement_timeout_s"
    assert _unknown(C.EvaluateConfig, ["pipeline", "batch_sise"]) == "pipeline.batch_sise"
    assert _unknown(C.EvaluateConfig, ["pipeline", "faults", "anything"]) is None  # free-form below `faults`
    assert _unknown(GENERATOR, ["tensor_parallel_size"]) is None and _unknown(GENERATOR, ["memory"]) == "memory"
    assert _unknown(C.EvaluateConfig, ["generator", "name"]) == "generator.name"  # by the schemas of its kinds


class Recording(dict):
    """A config mapping that records every read of a key it lacks (nested mappings record into the same list)."""

    def __init__(self, data: dict, absent: list[str], path: str = "") -> None:
        super().__init__({k: Recording(v, absent, f"{path}{k}.") if isinstance(v, dict) else v
                          for k, v in data.items()})
        self.absent, self.path = absent, path

    def get(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self.absent.append(f"{self.path}{key}")
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        if key not in self:
            self.absent.append(f"{self.path}{key}")
        return super().__getitem__(key)


COMPOSITIONS = [[]] + [[f"experiment={p.stem}"] for p in sorted((conf_dir() / "experiment").glob("*.yaml"))] + [
    [f"generator={p.stem}", "actors.generator.placement=actor"]
    for p in sorted((conf_dir() / "generator").glob("*.yaml"))]


@pytest.mark.parametrize("overrides", COMPOSITIONS, ids=[" ".join(o) or "default" for o in COMPOSITIONS])
def test_no_key_is_read_that_the_schema_lacks_when_planning(overrides: list[str]) -> None:
    from pcr_ray.pipeline.plan import pools

    absent: list[str] = []
    assert pools(Recording(to_plain(compose("evaluate", overrides)), absent))
    assert not absent, absent


def test_every_entry_point_has_a_schema_the_scan_knows() -> None:
    scanned = {schema for schema in BY_FILE.values() if not isinstance(schema, AnyOf)}
    assert set(SCHEMAS.values()) - scanned <= {C.ServeConfig}  # serve reads its settings through ServeSettings
