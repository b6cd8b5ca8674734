"""Fine-tuned generators made on first use and kept per machine: `sft:tiny` (the CPU recipe), `sft:test`.

`sft:tiny` is SmolLM2-135M-Instruct fully fine-tuned on generated physics (training templates and seeds) and GSM8K
train traces in every method's format, in about 12 minutes on 2 cores; `sft:test` is a few steps on a handful of
traces (the tests' fine-tune). Each lives in `<cache>/models/sft-<name>-<key>`, where the key digests the
recipe and the code that renders the examples, so a change to either trains anew; the oldest beyond three of
a name go.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from pcr_ray.configs import compose, to_plain
from pcr_ray.generators.model_folder import SFT_RECORD
from pcr_ray.paths import PACKAGE_DIR, build_once, cache_dir
from pcr_ray.sft.corpus import build_corpus, gsm8k_train_found
from pcr_ray.sft.train import LOOP_VERSION, SFTRecipe
from pcr_ray.sft.trainer import run_sft

QUICK_RECIPES = ("tiny", "test")  # conf/sft_recipe/<name>.yaml
KEEP = 3
# the code that decides what a quick fine-tune learns: its examples, their prompts, the physics; the loop is keyed
# by LOOP_VERSION (bumped by a change to pcr_ray/sft/train.py that changes what it trains)
_CODE = ("sft/examples.py", "sft/programs.py", "sft/corpus.py", "generators/prompts.py", "data/physics.py",
         "core/trace.py")


def quick_recipe(name: str) -> SFTRecipe:
    """The recipe `sft:<name>` (conf/sft_recipe/<name>.yaml, composed and checked)."""
    if name not in QUICK_RECIPES:
        raise ValueError(f"unknown quick fine-tune sft:{name}; known: " + ", ".join(f"sft:{n}" for n in QUICK_RECIPES))

    return SFTRecipe.from_config(to_plain(compose("sft", [f"sft_recipe={name}"]))["sft_recipe"])


def _key(recipe: SFTRecipe) -> str:
    root = PACKAGE_DIR
    data = {"gsm8k_train": bool(recipe.gsm8k_train) and gsm8k_train_found(), "loop": LOOP_VERSION}
    h = hashlib.sha256(json.dumps([recipe.to_dict(), data], sort_keys=True).encode())
    for pattern in _CODE:
        for f in sorted(root.glob(pattern)):
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def quick_sft_folder(name: str) -> Path:
    """Where the quick fine-tune `name` lives (it may not exist yet)."""
    return cache_dir() / "models" / f"sft-{name}-{_key(quick_recipe(name))}"


def _complete(folder: Path) -> bool:
    return (folder / SFT_RECORD).exists() and (folder / "model.safetensors").exists()


def ensure_quick_sft(name: str, resolve_base: Callable[[str], str]) -> Path:
    """The quick fine-tune `name`, trained on first use (in this process, all cores).

    `resolve_base` turns the recipe's base model name into a folder (pcr_ray.generators.model_folder.resolve_model,
    the caller: passed in, so that this module does not import the one that imports it)."""
    folder = quick_sft_folder(name)
    if _complete(folder):
        return folder

    def make(tmp: Path) -> None:
        recipe = quick_recipe(name)
        resolved = dataclasses.replace(recipe, base_model=resolve_base(recipe.base_model))
        examples, summary = build_corpus(recipe.physics_problems, recipe.physics_seed, recipe.gsm8k_train,
                                         recipe.formats, physics_mix=recipe.physics_mix)
        summary["recipe_name"] = f"sft:{name}"
        run_sft(examples, resolved, tmp, data_summary=summary)

    out = build_once(folder, _complete, make)
    base = f"sft-{name}-"
    olds = sorted((p for p in out.parent.glob(f"{base}*") if p.is_dir() and p != out and "tmp" not in p.name),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for p in olds[KEEP - 1:]:
        shutil.rmtree(p, ignore_errors=True)
    return out
