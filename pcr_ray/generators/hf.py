"""transformers backend: any Hugging Face causal LM folder, sampled with `generate` on CPU or GPU.

Meant for a model fine-tuned on the trace format (`pcr-ray sft`), which writes steps without a grammar: the
output is unconstrained, and whatever does not parse is rejected by the search like any other bad candidate.
The step prompt follows the checkpoint (`prompt: auto` reads sft.json: 'compact' for a fine-tuned folder,
'full' otherwise). Requests are batched: up to `batch_sequences` samples (k per request) share one left-padded
`generate` call, seeded by its first request, so that a GPU runs a lock-step search's requests together; with
`batch_sequences` at most k a call holds one request, whose samples are then a function of that request alone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pcr_ray.configs import HFGeneratorConfig
from pcr_ray.generators.base import GENERATORS, GeneratorStats, ProposalRequest
from pcr_ray.generators.llm_common import build_call, checkpoint_prompt, clean_output
from pcr_ray.generators.model_folder import resolve_model

DEFAULTS = HFGeneratorConfig  # the defaults of every option: the schema of its kind states them


@GENERATORS.register("hf")
class HFGenerator:
    """Batched propose() over a transformers model: requests grouped into left-padded `generate` calls."""

    uses_feedback = True
    model_free: ClassVar[bool] = False
    async_engine: ClassVar[bool] = False

    def __init__(self, model: str, *, device: str = DEFAULTS.device, dtype: str = DEFAULTS.dtype,
                 temperature: float = DEFAULTS.temperature, top_p: float = DEFAULTS.top_p,
                 max_tokens: int = DEFAULTS.max_tokens, max_tokens_free: int = DEFAULTS.max_tokens_free,
                 seed: int = DEFAULTS.seed, prompt: str = DEFAULTS.prompt,
                 num_threads: int | None = DEFAULTS.num_threads,
                 batch_sequences: int = DEFAULTS.batch_sequences) -> None:
        import torch  # heavy: torch
        from transformers import AutoModelForCausalLM, AutoTokenizer  # heavy: transformers

        if num_threads:
            torch.set_num_threads(int(num_threads))
        self.model_name = model
        self.folder = resolve_model(model)
        self.prompt = checkpoint_prompt(self.folder, prompt)
        self.tok = AutoTokenizer.from_pretrained(self.folder)
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(self.folder, dtype=getattr(torch, dtype)).to(device)
        self.model.eval()
        self.device, self.dtype = device, dtype
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.max_tokens_free, self.seed = max_tokens_free, seed
        self.batch_sequences = max(1, int(batch_sequences))
        self.stats = GeneratorStats()

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> HFGenerator:
        kw = {k: v for k, v in cfg.items() if k not in ("kind", "name", "description") and v is not None}
        return cls(**kw)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "hf", "model": self.model_name, "device": self.device, "dtype": self.dtype,
                "temperature": self.temperature, "prompt": self.prompt}

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """k seeded samples per request (unconstrained text; JSON modes re-serialised where they parse)."""
        return self.propose_counted(requests)[0]

    def propose_counted(self, requests: Sequence[ProposalRequest]) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """propose() and each request's (prompt, output) tokens: the prompt counted once per sample (generate
        expands it k times), the output up to its end-of-turn token."""
        t0 = time.perf_counter()
        out: list[list[str] | None] = [None] * len(requests)
        usage: list[tuple[int, int]] = [(0, 0)] * len(requests)
        for group in self.request_groups(requests):
            for i, texts, use in self._generate([(i, requests[i]) for i in group]):
                out[i], usage[i] = texts, use
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.candidates += sum(len(t or []) for t in out)
        self.stats.seconds += time.perf_counter() - t0
        return [t or [] for t in out], usage

    def request_groups(self, requests: Sequence[ProposalRequest]) -> list[list[int]]:
        """Indices of requests that share a generate call: same mode, at most batch_sequences samples in all."""
        groups: list[list[int]] = []
        open_: dict[str, tuple[list[int], int]] = {}
        for i, req in enumerate(requests):
            members, n = open_.get(req.mode, ([], 0))
            if members and n + req.k > self.batch_sequences:
                groups.append(members)
                members, n = [], 0
            open_[req.mode] = (members + [i], n + req.k)
        groups.extend(members for members, _ in open_.values())
        return groups

    def _generate(self, items: Sequence[tuple[int, ProposalRequest]]) -> list[tuple[int, list[str], tuple[int, int]]]:
        """One left-padded, seeded generate call over the requests' prompts, each repeated k times."""
        import torch  # heavy: torch

        calls = [build_call(req, base_seed=self.seed, constrained=False, prompt=self.prompt) for _, req in items]
        prompts = [self.tok.apply_chat_template(c.messages, tokenize=False, add_generation_prompt=True)
                   for c in calls]
        enc = self.tok(prompts, return_tensors="pt", add_special_tokens=False, padding=True).to(self.device)
        ks = torch.tensor([req.k for _, req in items], device=self.device)
        ids = enc["input_ids"].repeat_interleave(ks, dim=0)
        mask = enc["attention_mask"].repeat_interleave(ks, dim=0)
        torch.manual_seed(calls[0].seeds[0])
        mode = items[0][1].mode
        max_new = self.max_tokens if mode == "step" else self.max_tokens_free
        with torch.inference_mode():
            gen = self.model.generate(input_ids=ids, attention_mask=mask, do_sample=self.temperature > 0,
                                      temperature=self.temperature or None, top_p=self.top_p,
                                      max_new_tokens=max_new, pad_token_id=self.tok.pad_token_id)
        new = gen[:, ids.shape[1]:].tolist()
        eos, extra = self.tok.eos_token_id, self.stats.extra
        results, row = [], 0
        for (i, req), n_prompt_tokens in zip(items, enc["attention_mask"].sum(dim=1).tolist(), strict=True):
            texts, n_out = [], 0
            for toks in new[row:row + req.k]:
                n = toks.index(eos) if eos in toks else len(toks)
                extra["truncated"] = extra.get("truncated", 0) + (eos not in toks)
                n_out += n
                texts.append(clean_output(self.tok.decode(toks[:n], skip_special_tokens=True), req.mode))
            row += req.k
            n_prompt = int(n_prompt_tokens) * req.k
            extra["output_tokens"] = extra.get("output_tokens", 0) + n_out
            extra["prompt_tokens"] = extra.get("prompt_tokens", 0) + n_prompt
            results.append((i, texts, (n_prompt, n_out)))
        return results
