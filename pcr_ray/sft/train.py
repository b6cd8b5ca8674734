"""What a fine-tune is and what it writes: the recipe, the examples that fit its max_len, the folder and sft.json.

The loop itself is TRL's SFTTrainer (pcr_ray.sft.trainer), in this process for the quick fine-tunes and on Ray
Train's TorchTrainer for `pcr-ray sft` (pcr_ray.sft.command).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pcr_ray.configs import SFTRecipeConfig, frozen_view
from pcr_ray.generators.model_folder import SFT_RECORD
from pcr_ray.sft.corpus import corpus_summary, source_format
from pcr_ray.sft.examples import SFTExample

log = logging.getLogger(__name__)
IGNORE = -100
LOOP_VERSION = 2  # part of a quick fine-tune's key: bump it when a change to the loop changes what it trains


@dataclass(frozen=True)
class SFTRecipe(frozen_view(SFTRecipeConfig, "SFTRecipeFields", drop=("name",))):
    """What a fine-tune is: base model, data, optimisation. The fields, their defaults and meanings are
    pcr_ray.configs.SFTRecipeConfig's (less the recipe's `name`; lists as tuples). Stored in the checkpoint's
    sft.json."""

    @classmethod
    def from_config(cls, rcfg: Mapping[str, Any]) -> SFTRecipe:
        """The recipe of a checked `sft_recipe` config block (its `name` names the folder, not the recipe)."""
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in rcfg.items() if k != "name"})

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "formats": list(self.formats)}


@dataclass
class SFTResult:
    """A finished fine-tune: where it is, its loss curve and speed."""

    folder: Path
    losses: list[float] = field(default_factory=list)
    steps: int = 0
    tokens: int = 0  # tokens (prompt and reply) this run's attempt trained on, in `seconds`
    seconds: float = 0.0
    # what it trained on (corpus_summary of the examples that fit max_len) and what max_len cut: sft.json's `data`
    data: dict[str, Any] = field(default_factory=dict)
    eval_losses: list[list[float]] = field(default_factory=list)  # [step, held-out loss] pairs
    resumed_from_step: int = 0  # > 0: the run went on from a checkpoint of this step


def encode(tokenizer: Any, ex: SFTExample, max_len: int) -> tuple[list[int], list[int]] | None:
    """(input ids, labels) of one example, labels IGNORE over the prompt; None when it is longer than max_len
    tokens (the caller counts it: fit_max_len)."""
    messages = list(ex.messages)
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": ex.target}], tokenize=False)
    if not full.startswith(prompt):
        raise ValueError("the chat template renders the prompt differently with the reply appended; "
                         "fine-tuning needs a template whose reply follows the generation prompt")
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    f_ids = tokenizer(full.rstrip("\n"), add_special_tokens=False)["input_ids"]
    if len(f_ids) <= len(p_ids):
        raise ValueError(f"example {ex.problem_id} ({ex.fmt}) renders no reply tokens: its target is empty")
    if len(f_ids) > max_len:
        return None
    return f_ids, [IGNORE] * len(p_ids) + f_ids[len(p_ids):]


def fit_max_len(tokenizer: Any, examples: Sequence[SFTExample], recipe: SFTRecipe
                ) -> tuple[list[SFTExample], dict[str, Any]]:
    """The examples that fit recipe.max_len, and sft.json's `data` of them: their corpus_summary (the problems,
    examples and formats trained on) with `cut_by_max_len`, the examples left out as too long (count, by source and
    format). The cut is logged: a warning when there is one."""
    kept, cut = [], Counter()
    for ex in examples:
        if encode(tokenizer, ex, recipe.max_len) is None:
            cut[source_format(ex)] += 1
        else:
            kept.append(ex)
    data = {**corpus_summary(kept, recipe.physics_seed, recipe.physics_mix),
            "cut_by_max_len": {"examples": sum(cut.values()), "max_len": recipe.max_len,
                               "by_source_format": dict(sorted(cut.items()))}}
    if cut:
        log.warning("[sft] %d of %d examples are longer than max_len=%d tokens and are left out (%s); "
                    "sft_recipe.max_len keeps them", sum(cut.values()), len(examples), recipe.max_len,
                    ", ".join(f"{k} {v}" for k, v in sorted(cut.items())))
    else:
        log.info("[sft] all %d examples fit max_len=%d tokens", len(examples), recipe.max_len)
    return kept, data


def save(model: Any, tok: Any, recipe: SFTRecipe, result: SFTResult, data_summary: dict[str, Any]) -> None:
    """The fine-tuned weights (a LoRA merged in), the tokenizer and sft.json (sft_record)."""
    import torch  # heavy: torch

    inner = getattr(model, "module", model)  # DDP
    if recipe.lora_r > 0:
        inner = inner.merge_and_unload()
    result.folder.mkdir(parents=True, exist_ok=True)
    inner.to(torch.bfloat16).save_pretrained(str(result.folder), safe_serialization=True)
    tok.save_pretrained(str(result.folder))
    (result.folder / SFT_RECORD).write_text(json.dumps(sft_record(recipe, result, data_summary), indent=1))


def sft_record(recipe: SFTRecipe, result: SFTResult, data_summary: dict[str, Any]) -> dict[str, Any]:
    """sft.json: the recipe, the data trained on (the corpus' own keys, e.g. recipe_name, then the counts of what
    the loop used, what max_len cut and what was held out), the loss and held-out loss curves, tokens and speed,
    and the step a resumed run went on from."""
    return {"recipe": recipe.to_dict(), "data": {**data_summary, **result.data}, "prompt": recipe.prompt,
            "base_model": recipe.base_model, "loss_curve": result.losses, "steps": result.steps,
            "tokens": result.tokens,
            "eval_loss_curve": result.eval_losses, "resumed_from_step": result.resumed_from_step,
            "seconds": round(result.seconds, 1),
            "tokens_per_s": round(result.tokens / result.seconds, 1) if result.seconds else None}
