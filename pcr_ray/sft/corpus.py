"""The fine-tuning corpus: generated physics of the training templates and GSM8K *train* traces, never a test split.

The corpus draws the physics templates of split 'train' only; evaluations draw the held-out ones (split 'heldout',
pcr_ray.data.physics.HELDOUT_TEMPLATES; tests/test_data_split.py checks every config), so no evaluated template is
trained on. Its seeds are TRAIN_SEED_MIN and above, apart from the evaluation seeds too.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pcr_ray.data.physics import generate_problems
from pcr_ray.data.readers import iter_gsm8k, resolve_data_dir
from pcr_ray.sft.examples import SFTExample, corpus_examples

TRAIN_SEED_MIN = 1000


def training_problems(physics_problems: int, physics_seed: int, gsm8k_train: int, data_dir: str | None = None,
                      physics_mix: str = "all") -> list[Any]:
    """The problems a recipe trains on (physics of `physics_mix` and split 'train' from physics_seed; the first GSM8K
    train rows)."""
    if physics_seed < TRAIN_SEED_MIN:
        raise ValueError(f"physics_seed must be >= {TRAIN_SEED_MIN} (seeds below it are evaluation seeds), got "
                         f"{physics_seed}")
    problems: list[Any] = (generate_problems(physics_problems, seed=physics_seed, mix=physics_mix, split="train")
                           if physics_problems else [])
    if gsm8k_train and gsm8k_train_found(data_dir):
        rows = (p for p in iter_gsm8k("train", data_dir) if p.gold_trace)
        problems += list(itertools.islice(rows, gsm8k_train))
    return problems


def gsm8k_train_found(data_dir: str | None = None) -> bool:
    """Whether GSM8K's train split is in the data folder (without it a recipe trains on physics alone)."""
    return (resolve_data_dir(data_dir) / "gsm8k" / "train.jsonl").exists()


def build_corpus(physics_problems: int, physics_seed: int, gsm8k_train: int, formats: tuple[str, ...],
                 data_dir: str | None = None, physics_mix: str = "all") -> tuple[list[SFTExample], dict[str, Any]]:
    """The examples and a summary of them (corpus_summary) for sft.json."""
    problems = training_problems(physics_problems, physics_seed, gsm8k_train, data_dir, physics_mix)
    examples = corpus_examples(problems, formats)
    return examples, corpus_summary(examples, physics_seed, physics_mix)


def source_format(ex: SFTExample) -> str:
    """'source/format' of an example (physics/step, gsm8k/python, ...): how sft.json counts examples."""
    return f"{ex.problem_id.split('/')[0]}/{ex.fmt}"


def corpus_summary(examples: Sequence[SFTExample], physics_seed: int, physics_mix: str) -> dict[str, Any]:
    """Counts of these examples, never of what was asked for: the problems of each source they come from (a GSM8K
    train file shorter than the recipe's gsm8k_train gives fewer), the examples, by source and format; the seed
    and template mix of the physics."""
    ids: dict[str, set[str]] = {}
    for ex in examples:
        ids.setdefault(ex.problem_id.split("/")[0], set()).add(ex.problem_id)
    by = Counter(source_format(ex) for ex in examples)
    return {"physics": {"problems": len(ids.get("physics", ())), "seed": physics_seed, "mix": physics_mix,
                        "split": "train"},
            "gsm8k_train": {"problems": len(ids.get("gsm8k", ())), "split": "train"},
            "problems": sum(len(v) for v in ids.values()), "examples": len(examples),
            "by_source_format": dict(sorted(by.items()))}
