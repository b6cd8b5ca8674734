"""What the LLM backends share: per-request op choice, prompts, schemas, seeds, and raw-output cleanup."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from pcr_ray.core.primitives import REGISTRY
from pcr_ray.core.primitives.registry import EXACT
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.model_folder import read_recipe
from pcr_ray.generators.prompts import PROMPTS, Message, messages_for
from pcr_ray.generators.schema import (
    full_trace_schema,
    givens_schema,
    request_schema,
    satisfiable_ops,
    visible_vars,
)

# Always offered to an LLM (when satisfiable): the core ops every trace may rely on.
CORE_OPS: tuple[str, ...] = ("add", "sub", "mul", "div", "pow", "sqrt", "square", "neg", "const", "sum",
                             "percent_of", "scale", "ratio")


def prompt_ops(req: ProposalRequest, max_ops: int = 40) -> list[str]:
    """The ops shown to (and allowed for) a model on this request: those whose exact-dimension parameters
    match variables at hand, ranked by how many such parameters they have, then the core ops; at most max_ops.
    """
    variables = visible_vars(req.givens, req.steps)
    ok = satisfiable_ops(variables, include_expr=False)
    dims = {v.dims for v in variables if v.dims is not None}

    def n_exact(name: str) -> int:
        return sum(1 for p in REGISTRY[name].params if p.kind == "var" and p.rkind == EXACT and p.rdims in dims)

    domain = sorted((o for o in ok if n_exact(o) > 0), key=lambda o: (-n_exact(o), o))
    core = [o for o in CORE_OPS if o in ok]
    picked = core + [o for o in domain if o not in core]
    return sorted(picked[:max_ops])


@dataclass(frozen=True)
class LLMCall:
    """One request turned into what a backend sends: messages, a JSON schema (or None) and sample seeds."""

    messages: list[Message]
    schema: dict[str, Any] | None
    seeds: tuple[int, ...]
    ops: tuple[str, ...]


def sample_seeds(req: ProposalRequest, base_seed: int) -> tuple[int, ...]:
    """k distinct deterministic seeds for a request (problem id, step number, request seed, sample index)."""
    key = f"{base_seed}|{req.problem_id}|{len(req.steps)}|{req.seed}|{len(req.feedback)}"
    return tuple(zlib.crc32(f"{key}|{i}".encode()) & 0x7FFFFFFF for i in range(req.k))


def build_call(req: ProposalRequest, *, base_seed: int = 0, schema_level: str = "ops", constrained: bool = True,
               max_ops: int = 40, prompt: str = "full") -> LLMCall:
    """Messages and schema for one request, by mode (python/direct requests are unconstrained); `prompt`:
    'full' (op list and worked example) or 'compact' (for a model fine-tuned on traces)."""
    ops: list[str] = []
    schema: dict[str, Any] | None = None
    if req.mode in ("step", "full"):
        ops = prompt_ops(req, max_ops)
        variables = visible_vars(req.givens, req.steps)
        if constrained:
            schema = (request_schema(variables, level=schema_level, ops=ops) if req.mode == "step"
                      else full_trace_schema(variables, level=schema_level, ops=ops))
    elif req.mode == "givens" and constrained:
        schema = givens_schema()
    return LLMCall(messages_for(req, ops, prompt), schema, sample_seeds(req, base_seed), tuple(ops))


def clean_output(text: str, mode: str) -> str:
    """A raw model output as a candidate string: JSON modes re-serialised compactly when they parse."""
    text = text.strip()
    if mode in ("step", "full", "givens"):
        try:
            return json.dumps(json.loads(text), separators=(",", ":"))
        except (ValueError, RecursionError):
            return text  # left for the search to reject as malformed (that is a measured outcome)
    return text


def batch_calls(requests: Sequence[ProposalRequest], **kw: Any) -> list[LLMCall]:
    """build_call for every request, in order."""
    return [build_call(r, **kw) for r in requests]


def count_schema_valid(requests: Sequence[ProposalRequest], outputs: Sequence[Sequence[str]], schema_level: str,
                       max_ops: int) -> tuple[int, int]:
    """(schema-valid candidates, all candidates): each candidate checked against its own request's JSON Schema."""
    valid = total = 0
    for req, cands in zip(requests, outputs, strict=True):
        schema = build_call(req, schema_level=schema_level, max_ops=max_ops).schema
        for c in cands:
            total += 1
            try:
                jsonschema.validate(json.loads(c), schema)
                valid += 1
            except (ValueError, jsonschema.ValidationError):
                pass
    return valid, total


def checkpoint_prompt(folder: str, prompt: str) -> str:
    """The step prompt for a model folder: `prompt` unless 'auto', then what sft.json records ('full' without)."""
    if prompt != "auto":
        if prompt not in PROMPTS:
            raise ValueError(f"generator.prompt must be auto or one of {PROMPTS}, got {prompt!r}")
        return prompt

    record = read_recipe(folder)
    return str(record.get("prompt", "full")) if record else "full"
