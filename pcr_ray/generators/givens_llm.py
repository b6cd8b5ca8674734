"""LLM givens extraction through the generator interface (mode 'givens', JSON-schema constrained output).

The paper fills the givens with a small parser model; this is that path. It implements the data package's
GivensExtractor protocol (`extract(text) -> Extraction`), so it is selectable beside the rule-based default
and measured with the same `pcr_ray.data.givens.score_extraction`. Entries whose name is not an identifier,
whose unit does not parse, or whose name repeats are dropped (counted in `dropped`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pcr_ray.core.trace import NAME_RE, Given
from pcr_ray.core.units import try_unit_info
from pcr_ray.data.givens import Extraction, RuleBasedExtractor, Target
from pcr_ray.generators.base import ProposalRequest, build_generator


def parse_givens_output(raw: str) -> tuple[tuple[Given, ...], Target, int]:
    """Givens, target and the number of dropped entries from one model output (bad JSON -> nothing)."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return (), Target(), 0
    if not isinstance(obj, dict):
        return (), Target(), 0
    givens: list[Given] = []
    dropped = 0
    names: set[str] = set()
    for g in obj.get("givens") or []:
        if not isinstance(g, dict):
            dropped += 1
            continue
        name, value, unit = g.get("name"), g.get("value"), (g.get("unit") or "dimensionless")
        if not (isinstance(name, str) and NAME_RE.match(name)) or name in names \
                or not isinstance(value, (int, float)) or isinstance(value, bool) or not isinstance(unit, str) \
                or try_unit_info(unit) is None:
            dropped += 1
            continue
        names.add(name)
        desc = g.get("desc") if isinstance(g.get("desc"), str) else ""
        givens.append(Given(name, float(value), unit, desc))
    target = Target()
    t = obj.get("target")
    if isinstance(t, dict) and isinstance(t.get("unit"), str):
        info = try_unit_info(t["unit"])
        if info is not None:
            target = Target(t["unit"], info.dims, str(t.get("desc") or "")[:60])
    return tuple(givens), target, dropped


class LLMGivensExtractor:
    """Givens from a generator (llamacpp / vllm) in 'givens' mode; one batched propose() per extract_many."""

    def __init__(self, generator: Any, *, seed: int = 0) -> None:
        self.generator = generator
        self.seed = seed
        self.dropped = 0
        self.failed = 0

    def extract_many(self, texts: Sequence[str]) -> list[Extraction]:
        reqs = [ProposalRequest(f"givens-{i}", t, k=1, mode="givens", seed=self.seed) for i, t in enumerate(texts)]
        outs = self.generator.propose(reqs)
        res = []
        for cands in outs:
            raw = cands[0] if cands else ""
            givens, target, dropped = parse_givens_output(raw)
            self.dropped += dropped
            self.failed += not givens
            res.append(Extraction(givens, target))
        return res

    def extract(self, text: str) -> Extraction:
        return self.extract_many([text])[0]


def build_extractor(cfg: Mapping[str, Any], generator: Any = None) -> Any:
    """From a checked `givens` config (pcr_ray.configs.GivensConfig): kind 'rule' -> the data package's
    RuleBasedExtractor; 'llm' -> LLMGivensExtractor over `generator`, else over one built from cfg['generator']."""
    kind = cfg["kind"]
    if kind in ("rule", "rules", "rule_based"):
        return RuleBasedExtractor()
    if kind == "llm":
        if generator is None:
            generator = build_generator(cfg["generator"])
        return LLMGivensExtractor(generator, seed=int(cfg["seed"]))
    raise ValueError(f"unknown givens extractor {kind!r}; expected 'rule' or 'llm'")


