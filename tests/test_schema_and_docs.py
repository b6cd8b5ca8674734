"""JSON Schema export is valid and agrees with the parser; the generated primitives table is in sync."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

from pcr_ray.commands.core import primitives_markdown
from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.trace import step_json_schema, trace_json_schema
from tests.gold_traces import GOLD

DOCS = Path(__file__).resolve().parent.parent / "pcr_ray" / "core" / "primitives" / "PRIMITIVES.md"


def test_schemas_are_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(trace_json_schema())
    jsonschema.Draft202012Validator.check_schema(step_json_schema())


def test_every_gold_trace_matches_the_schema():
    validator = jsonschema.Draft202012Validator(trace_json_schema())  # built once: validate() rechecks the schema
    for _, _, trace, _ in GOLD:
        validator.validate(trace)


def test_step_schema_rejects_bad_steps_and_accepts_answers():
    schema = step_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)  # one validator, and is_valid below: no best-match error search over the anyOf branches
    ok = {"op": "add", "args": {"x": "a", "y": 2}, "out": {"name": "c", "unit": "m"}}
    validator.validate(ok)
    validator.validate({"answer": [{"name": "c", "unit": "m"}]})
    for bad in ({"op": "add", "args": {"x": "a"}, "out": {"name": "c", "unit": "m"}},           # missing arg
                {"op": "nope", "args": {}, "out": {"name": "c", "unit": "m"}},                  # unknown op
                {"op": "add", "args": {"x": "a", "y": "b", "z": "q"}, "out": {"name": "c", "unit": "m"}},
                {"op": "const", "args": {"name": "gravity"}, "out": {"name": "c", "unit": "m"}}):
        assert not validator.is_valid(bad), bad


def test_schema_covers_registry_and_restricts():
    schema = step_json_schema()
    ops = {alt["properties"]["op"]["const"] for alt in schema["anyOf"] if "op" in alt["properties"]}
    assert ops == set(REGISTRY)
    small = step_json_schema(["add", "mul"])
    assert len(small["anyOf"]) == 3


def test_primitives_md_in_sync():
    assert DOCS.exists(), "run `make docs` to generate pcr_ray/core/primitives/PRIMITIVES.md"
    assert DOCS.read_text() == primitives_markdown(), "PRIMITIVES.md is stale: run `make docs`"


def test_registry_has_120_plus_with_docs():
    assert len(REGISTRY) >= 120
    for p in REGISTRY.values():
        assert p.formula and p.description and p.family, p.name


def test_cli_schema_and_primitives():
    out = subprocess.run([sys.executable, "-m", "pcr_ray", "schema", "step=true", "ops=[add]"], capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout)["anyOf"][0]["properties"]["op"]["const"] == "add"
    out = subprocess.run([sys.executable, "-m", "pcr_ray", "primitives", "family=circuits"], capture_output=True,
                         text=True, check=True)
    assert "ohm_voltage" in out.stdout and "kin_displacement" not in out.stdout
