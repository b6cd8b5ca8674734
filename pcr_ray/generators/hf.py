"""transformers backend: any Hugging Face causal LM folder, sampled with `generate` on CPU or GPU.

Meant for a model fine-tuned on the trace format (`pcr-ray sft`), which writes steps without a grammar: the
output is unconstrained, and whatever does not parse is rejected by the search like any other bad candidate.
The step prompt follows the checkpoint (`prompt: auto` reads sft.json: 'compact' for a fine-tuned folder,
'full' otherwise). The k samples of a request share one seeded `generate` call (num_return_sequences=k).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pcr_ray.generators.base import GENERATORS, GeneratorStats, ProposalRequest
from pcr_ray.generators.llm_common import build_call, checkpoint_prompt, clean_output


@GENERATORS.register("hf")
class HFGenerator:
    """Batched propose() over a transformers model; requests run one after another."""

    uses_feedback = True
    model_free: ClassVar[bool] = False
    async_engine: ClassVar[bool] = False

    def __init__(self, model: str, *, device: str = "cpu", dtype: str = "float32", temperature: float = 0.8,
                 top_p: float = 0.95, max_tokens: int = 160, max_tokens_free: int = 384, seed: int = 0,
                 prompt: str = "auto", num_threads: int | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from pcr_ray.generators.model_folder import resolve_model

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
        import torch

        t0 = time.perf_counter()
        out: list[list[str]] = []
        usage: list[tuple[int, int]] = []
        extra = self.stats.extra
        for req in requests:
            call = build_call(req, base_seed=self.seed, constrained=False, prompt=self.prompt)
            text = self.tok.apply_chat_template(call.messages, tokenize=False, add_generation_prompt=True)
            enc = self.tok(text, return_tensors="pt", add_special_tokens=False).to(self.device)
            torch.manual_seed(call.seeds[0])
            max_new = self.max_tokens if req.mode == "step" else self.max_tokens_free
            with torch.inference_mode():
                gen = self.model.generate(**enc, do_sample=self.temperature > 0, temperature=self.temperature or None,
                                          top_p=self.top_p, max_new_tokens=max_new, num_return_sequences=req.k,
                                          pad_token_id=self.tok.pad_token_id)
            new = gen[:, enc["input_ids"].shape[1]:]
            eos = self.tok.eos_token_id
            texts = []
            n_out = 0
            for row in new:
                ids = row.tolist()
                n = ids.index(eos) if eos in ids else len(ids)
                extra["truncated"] = extra.get("truncated", 0) + (eos not in ids)
                n_out += n
                texts.append(clean_output(self.tok.decode(ids[:n], skip_special_tokens=True), req.mode))
            n_prompt = int(enc["input_ids"].shape[1]) * req.k
            extra["output_tokens"] = extra.get("output_tokens", 0) + n_out
            extra["prompt_tokens"] = extra.get("prompt_tokens", 0) + n_prompt
            usage.append((n_prompt, n_out))
            out.append(texts)
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.candidates += sum(len(t) for t in out)
        self.stats.seconds += time.perf_counter() - t0
        return out, usage
