"""The problems of a dataset config: its sources, each limited, sampled and checked for duplicate ids."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from pcr_ray.data.readers import FILE_KEYS, data_present, load_dataset, missing_data_hint

log = logging.getLogger(__name__)


def load_problems(dcfg: Mapping[str, Any]) -> list[Any]:
    """The problems of a dataset config: `sources`, each {name, limit, sample: first|random, seed, kwargs,
    optional}; a top-level `limit` caps the total (and every source without its own limit). An `optional` source
    whose data files are not in the data folder is left out, with one line saying how to add it."""
    sources = dcfg.get("sources") or [dcfg]
    total = dcfg.get("limit")
    out: list[Any] = []
    seen: set[str] = set()
    for src in sources:
        src = dict(src)
        name = src["name"]
        limit = src.get("limit") if src.get("limit") is not None else total
        kwargs = dict(src.get("kwargs") or {})
        if name == "file":  # its settings sit beside the name: {name: file, path: ..., fields: {...}}
            kwargs.update({k: src[k] for k in FILE_KEYS if src.get(k) is not None})
        sample = str(src.get("sample", "first"))
        if src.get("optional") and not data_present(name, dcfg.get("data_dir")):
            log.warning("evaluate: left out %s (optional): %s", name, missing_data_hint(name, dcfg.get("data_dir")))
            continue
        if sample == "random" and limit is not None:
            pool = load_dataset(name, dcfg.get("data_dir"), None, **kwargs)
            if src.get("require_trace"):
                pool = [p for p in pool if p.gold_trace is not None]
            rng = random.Random(int(src.get("seed", 0)))
            probs = rng.sample(pool, min(int(limit), len(pool)))
        else:
            probs = load_dataset(name, dcfg.get("data_dir"), None if src.get("require_trace") else limit, **kwargs)
            if src.get("require_trace"):
                probs = [p for p in probs if p.gold_trace is not None][: limit or None]
        for p in probs:
            if p.id in seen:
                raise ValueError(f"problem id {p.id!r} appears twice in dataset {dcfg.get('name')!r}")
            seen.add(p.id)
            out.append(p)
    if total is not None:
        out = out[: int(total)]
    if not out:
        raise ValueError(f"dataset {dcfg.get('name')!r} yielded no problems")
    return out
