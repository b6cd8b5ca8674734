"""The generator's fine-tune on TRL's SFTTrainer: prompt-completion chats, loss on the completion only.

Each example is a conversational prompt-completion row (the request's messages; the target as the assistant's
reply), rendered with the model's chat template by TRL. Examples longer than the recipe's max_len are left out
and counted (pcr_ray.sft.train.fit_max_len), never truncated; a share of the problems (`eval_share`) is held out
and its loss evaluated every `eval_every` steps and at the end. Length-grouped batches, gradient accumulation and
gradient checkpointing are the Trainer's; a LoRA is PEFT's (merged into the saved weights, so the folder is a
plain Hugging Face model that vLLM and transformers load unchanged). `run_sft` fits in this process (the quick
fine-tunes); `pcr_ray.sft.command` runs the same trainer on Ray Train's TorchTrainer (DDP, Ray Train checkpoints,
resume).
"""

from __future__ import annotations

import json
import logging
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pcr_ray.sft.examples import SFTExample
from pcr_ray.sft.train import SFTRecipe, SFTResult, fit_max_len, save

log = logging.getLogger(__name__)


def split_held_out(examples: Sequence[SFTExample], share: float, seed: int
                   ) -> tuple[list[SFTExample], list[SFTExample]]:
    """(train, held out): the examples of a seeded `share` of the problems held out (at least one problem when
    share > 0 and there are two or more); every example of a problem on one side."""
    problems = sorted({e.problem_id for e in examples})
    n = min(len(problems) - 1, max(1, round(share * len(problems)))) if share > 0 and len(problems) > 1 else 0
    held = set(random.Random(seed).sample(problems, n))
    return [e for e in examples if e.problem_id not in held], [e for e in examples if e.problem_id in held]


def chat_rows(examples: Sequence[SFTExample]) -> list[dict[str, Any]]:
    """TRL's conversational prompt-completion rows: the messages, then the target as the assistant's turn."""
    return [{"prompt": [dict(m) for m in e.messages], "completion": [{"role": "assistant", "content": e.target}]}
            for e in examples]


def sft_config(recipe: SFTRecipe, out_dir: Path, *, held_out: bool, save_every: int = 0,
               use_cpu: bool = True) -> Any:
    """TRL's SFTConfig of a recipe: its schedule and batches, completion-only loss, no truncation (the examples
    fit), a checkpoint every `save_every` steps (0: none; Ray Train's run keeps them), no reporting integrations."""
    from trl import SFTConfig  # heavy: trl, transformers, torch

    evaluate_often = held_out and recipe.eval_every > 0
    return SFTConfig(
        output_dir=str(out_dir), seed=recipe.seed, data_seed=recipe.seed,
        per_device_train_batch_size=recipe.batch_size, per_device_eval_batch_size=recipe.batch_size,
        gradient_accumulation_steps=recipe.grad_accum, activation_checkpointing=recipe.gradient_checkpointing,
        learning_rate=recipe.lr, weight_decay=0.0, max_grad_norm=1.0, lr_scheduler_type="linear",
        warmup_steps=recipe.warmup, num_train_epochs=recipe.epochs, max_steps=recipe.max_steps or -1,
        bf16=recipe.bf16, use_cpu=use_cpu, train_sampling_strategy="group_by_length",
        max_length=None, completion_only_loss=True, packing=False, dataset_num_proc=None,
        logging_strategy="steps", logging_steps=1, logging_first_step=True,
        eval_strategy="steps" if evaluate_often else "no", eval_steps=recipe.eval_every or None,
        save_strategy="steps" if save_every else "no", save_steps=save_every or 500, save_only_model=False,
        report_to=[], disable_tqdm=True, dataloader_num_workers=0, remove_unused_columns=True,
    )


def build_trainer(examples: Sequence[SFTExample], recipe: SFTRecipe, out_dir: Path, *,
                  callbacks: Sequence[Any] = (), save_every: int = 0) -> tuple[Any, dict[str, Any]]:
    """TRL's SFTTrainer over the examples that fit max_len (the held-out problems as its eval set), and sft.json's
    `data` of them (problems, examples, formats, what max_len cut, how many were held out)."""
    import torch  # heavy: torch
    from datasets import Dataset  # heavy: datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer  # heavy: transformers
    from trl import SFTTrainer  # heavy: trl

    tok = AutoTokenizer.from_pretrained(recipe.base_model)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    kept, data = fit_max_len(tok, examples, recipe)
    if not kept:
        raise ValueError(f"no example fits max_len={recipe.max_len} tokens (sft_recipe.max_len)")
    train, held = split_held_out(kept, recipe.eval_share, recipe.seed)
    data["held_out"] = {"problems": len({e.problem_id for e in held}), "examples": len(held)}
    peft = None
    if recipe.lora_r > 0:
        from peft import LoraConfig  # heavy: peft

        peft = LoraConfig(r=recipe.lora_r, lora_alpha=recipe.lora_alpha, lora_dropout=0.0,
                          target_modules="all-linear", task_type="CAUSAL_LM")
    torch.manual_seed(recipe.seed)
    model = AutoModelForCausalLM.from_pretrained(recipe.base_model, dtype=torch.float32)
    trainer = SFTTrainer(
        model=model, processing_class=tok, peft_config=peft, callbacks=list(callbacks),
        args=sft_config(recipe, out_dir, held_out=bool(held), save_every=save_every,
                        use_cpu=not torch.cuda.is_available()),
        train_dataset=Dataset.from_list(chat_rows(train)),
        eval_dataset=Dataset.from_list(chat_rows(held)) if held else None)
    return trainer, data


def fit(trainer: Any, data: dict[str, Any], *, resume_from: str | None = None) -> SFTResult:
    """trainer.train() (from a Trainer checkpoint folder when given), the held-out loss at the end, and what the
    run measured: its loss and held-out loss curves, tokens and time."""
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume_from)
    if trainer.eval_dataset is not None:
        trainer.evaluate()
    seconds = time.perf_counter() - t0
    history = trainer.state.log_history
    losses = {int(h["step"]): round(float(h["loss"]), 5) for h in history if "loss" in h}
    evals = {int(h["step"]): round(float(h["eval_loss"]), 5) for h in history if "eval_loss" in h}
    # TRL's count of this process's tokens (a resumed attempt counts from its start, like `seconds`)
    tokens = ([int(h["num_tokens"]) for h in history if "num_tokens" in h] or [0])[-1]
    resumed = int(json.loads((Path(resume_from) / "trainer_state.json").read_text())["global_step"]) \
        if resume_from else 0
    result = SFTResult(Path(), losses=[losses[s] for s in sorted(losses)], steps=int(trainer.state.global_step),
                       tokens=tokens, seconds=seconds, data=data)
    result.eval_losses = [[s, evals[s]] for s in sorted(evals)]
    result.resumed_from_step = resumed
    log.info("[sft] %d steps, loss %s -> %s, held-out loss %s, %d tokens in %.0f s", result.steps,
             result.losses[0] if result.losses else None, result.losses[-1] if result.losses else None,
             result.eval_losses[-1][1] if result.eval_losses else None, tokens, seconds)
    return result


def run_sft(examples: Sequence[SFTExample], recipe: SFTRecipe, out: Path, *, data_summary: dict[str, Any]
            ) -> SFTResult:
    """Fine-tune in this process and save the folder at `out` (no mid-run checkpoints)."""
    with tempfile.TemporaryDirectory() as tmp:
        trainer, data = build_trainer(examples, recipe, Path(tmp))
        result = fit(trainer, data)
        result.folder = out
        save(trainer.model, trainer.processing_class, recipe, result, data_summary)
    return result
