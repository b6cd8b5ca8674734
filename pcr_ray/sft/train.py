"""What a fine-tune is and what it writes: the recipe, the examples that fit its max_len, the folder and sft.json.

The loop itself is TRL's SFTTrainer (pcr_ray.sft.trainer), in this process for the quick fine-tunes and on Ray
Train's TorchTrainer for `pcr-ray sft` (pcr_ray.sft.command).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
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


# The hand-written loop, kept beside TRL's until benchmarks/bench_sft.py has compared them

def batches(encoded: Sequence[tuple[list[int], list[int]]], batch_size: int, seed: int
            ) -> list[list[tuple[list[int], list[int]]]]:
    """Batches of similar length (less padding), in a seeded random order."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    groups = [[encoded[i] for i in order[k:k + batch_size]] for k in range(0, len(order), batch_size)]
    random.Random(seed).shuffle(groups)
    return groups



def collate(batch: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, Any]:
    """Left-padded tensors (every reply ends at the last column): input_ids, attention_mask, position_ids,
    labels."""
    import torch  # heavy: torch

    n = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), n), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), n), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), n), dtype=torch.long)
    for i, (x, y) in enumerate(batch):
        ids[i, n - len(x):] = torch.tensor(x)
        labels[i, n - len(y):] = torch.tensor(y)
        mask[i, n - len(x):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels}



def target_loss(model: Any, batch: dict[str, Any]) -> Any:
    """Mean cross-entropy over the reply tokens, with logits computed only over the replies' columns (the
    vocabulary projection of the prompt tokens, most of each example, is skipped)."""
    import torch  # heavy: torch

    labels = batch["labels"]
    n = labels.shape[1]
    first = int((labels != IGNORE).float().argmax(-1).min())  # the earliest reply column in the batch
    keep = n - first + 1 if first > 0 else n
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   position_ids=batch["position_ids"], logits_to_keep=keep).logits
    # logits at column p predict the token at p + 1: columns n-keep .. n-2 predict n-keep+1 .. n-1
    pred = logits[:, :-1].float()
    gold = labels[:, n - keep + 1:]
    return torch.nn.functional.cross_entropy(pred.reshape(-1, pred.shape[-1]), gold.reshape(-1),
                                             ignore_index=IGNORE)



def load_base(recipe: SFTRecipe) -> tuple[Any, Any]:
    """The base model (fp32 weights; a LoRA wrapped around it when lora_r > 0) and its tokenizer."""
    import torch  # heavy: torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # heavy: transformers

    tok = AutoTokenizer.from_pretrained(recipe.base_model)
    model = AutoModelForCausalLM.from_pretrained(recipe.base_model, dtype=torch.float32)
    if recipe.lora_r > 0:
        from peft import LoraConfig, get_peft_model  # heavy: peft

        model = get_peft_model(model, LoraConfig(r=recipe.lora_r, lora_alpha=recipe.lora_alpha, lora_dropout=0.0,
                                                 target_modules="all-linear", task_type="CAUSAL_LM"))
    return model, tok



def _to_device(model: Any) -> Any:
    import torch  # heavy: torch

    return model.to("cuda") if torch.cuda.is_available() else model



def train_model(examples: Sequence[SFTExample], recipe: SFTRecipe, *, prepare: Callable[[Any], Any] = _to_device,
                shard: tuple[int, int] = (0, 1), log_every: int = 10) -> tuple[Any, Any, SFTResult]:
    """Fine-tune on `examples` (this worker's shard of them); returns (model, tokenizer, result).

    Every worker takes the same number of steps (DDP needs it): the step count comes from all the examples.
    Worker 0 logs the loss every `log_every` steps.
    """
    import torch  # heavy: torch

    torch.manual_seed(recipe.seed)
    model, tok = load_base(recipe)
    model = prepare(model)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    kept, data = fit_max_len(tok, examples, recipe)
    encoded = [encode(tok, e, recipe.max_len) for e in kept]
    if not encoded:
        raise ValueError(f"no example fits max_len={recipe.max_len} tokens (sft_recipe.max_len)")
    total = max(1, math.ceil(math.ceil(len(encoded) / recipe.batch_size) / shard[1] * recipe.epochs))
    if recipe.max_steps:
        total = min(total, recipe.max_steps)
    groups = batches(encoded[shard[0]::shard[1]] or encoded, recipe.batch_size, recipe.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=recipe.lr, weight_decay=0.0)
    warm = max(1, recipe.warmup)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.05, 1 - s / total))
    result = SFTResult(Path(), data=data)
    model.train()
    device = next(model.parameters()).device
    t0 = time.perf_counter()
    for step in range(total):
        batch = collate(groups[step % len(groups)], pad_id)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=recipe.bf16):
            loss = target_loss(model, {k: v.to(device) for k, v in batch.items()})
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        result.losses.append(round(float(loss.detach()), 5))
        result.tokens += int(batch["attention_mask"].sum())
        if shard[0] == 0 and log_every and (step + 1) % log_every == 0:
            rate = result.tokens / (time.perf_counter() - t0)
            log.info("[sft] step %d/%d  loss %.4f  %.0f tokens/s", step + 1, total, result.losses[-1], rate)
    result.steps, result.seconds = total, time.perf_counter() - t0
    return model, tok, result



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
