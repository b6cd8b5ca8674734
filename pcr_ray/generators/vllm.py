"""vLLM backend (extra `gpu`): one LLM engine per actor, k samples per request with JSON-schema structured output.

Kept thin on purpose: everything but the two engine calls is a plain function tested on CPU
(`build_vllm_batch`, `collect_texts`). vLLM is imported only inside `VLLMGenerator._engine`.

vLLM API used (checked against vllm's docs "Structured Outputs" and vllm/sampling_params.py, v0.12+:
the `guided_json` / GuidedDecodingParams fields were removed in v0.12.0 in favour of structured outputs):
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    LLM(model=..., tensor_parallel_size=..., max_model_len=..., gpu_memory_utilization=..., seed=..., dtype=...)
    SamplingParams(n=k, temperature=..., top_p=..., max_tokens=..., seed=...,
                   structured_outputs=StructuredOutputsParams(json=schema_dict))
    llm.get_tokenizer().apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    llm.generate(prompts, sampling_params=[one per prompt], use_tqdm=False) -> [RequestOutput]
    RequestOutput.outputs[i].text
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pcr_ray.generators.base import GeneratorStats, ProposalRequest
from pcr_ray.generators.llm_common import build_call, clean_output
from pcr_ray.generators.prompts import Message

ChatTemplate = Callable[[list[Message]], str]


@dataclass(frozen=True)
class VLLMRequest:
    """One prompt and the keyword arguments of its SamplingParams (`schema` goes to StructuredOutputsParams)."""

    prompt: str
    n: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    schema: dict[str, Any] | None
    mode: str

    def sampling_kwargs(self) -> dict[str, Any]:
        return {"n": self.n, "temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                "seed": self.seed}


def build_vllm_batch(requests: Sequence[ProposalRequest], chat_template: ChatTemplate, *, temperature: float,
                     top_p: float, max_tokens: int, max_tokens_free: int, base_seed: int, schema_level: str,
                     max_ops: int) -> list[VLLMRequest]:
    """The engine's inputs for a batch: chat-templated prompts, n = k, a seed and the JSON schema per request."""
    batch = []
    for req in requests:
        call = build_call(req, base_seed=base_seed, schema_level=schema_level, constrained=True, max_ops=max_ops)
        mt = max_tokens if req.mode == "step" else max_tokens_free
        batch.append(VLLMRequest(chat_template(call.messages), req.k, temperature, top_p, mt, call.seeds[0],
                                 call.schema, req.mode))
    return batch


def collect_texts(outputs: Sequence[Any], batch: Sequence[VLLMRequest]) -> list[list[str]]:
    """RequestOutput list -> candidate strings per request (in order; JSON modes re-serialised compactly)."""
    if len(outputs) != len(batch):
        raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(batch)} prompts")
    return [[clean_output(c.text, b.mode) for c in o.outputs] for o, b in zip(outputs, batch, strict=True)]


class VLLMGenerator:
    """vLLM on GPU: Qwen2.5-Math-7B-Instruct (paper) or -1.5B-Instruct; engine built on first use."""

    uses_feedback = True

    def __init__(self, model: str = "Qwen/Qwen2.5-Math-7B-Instruct", *, tensor_parallel_size: int = 1,
                 max_model_len: int = 4096, gpu_memory_utilization: float = 0.85, dtype: str = "auto",
                 temperature: float = 0.7, top_p: float = 0.95, max_tokens: int = 256, max_tokens_free: int = 1024,
                 seed: int = 0, schema_level: str = "ops", max_ops: int = 48) -> None:
        self.model = model
        self.engine_kwargs = {"model": model, "tensor_parallel_size": tensor_parallel_size,
                              "max_model_len": max_model_len, "gpu_memory_utilization": gpu_memory_utilization,
                              "dtype": dtype, "seed": seed}
        self.temperature, self.top_p, self.max_tokens, self.max_tokens_free = temperature, top_p, max_tokens, \
            max_tokens_free
        self.seed, self.schema_level, self.max_ops = seed, schema_level, max_ops
        self.stats = GeneratorStats()
        self._llm: Any = None

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> VLLMGenerator:
        kw = {k: v for k, v in cfg.items() if k not in ("kind", "name", "description") and v is not None}
        return cls(**kw)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "vllm", "model": self.model, "temperature": self.temperature,
                "schema_level": self.schema_level, **{k: self.engine_kwargs[k] for k in ("tensor_parallel_size",
                                                                                          "max_model_len")}}

    def _engine(self) -> Any:
        if self._llm is None:
            try:
                from vllm import LLM
            except ImportError as exc:
                raise RuntimeError("vLLM is not installed: install the `gpu` extra on a GPU machine "
                                   "(pip install -e '.[gpu]')") from exc
            self._llm = LLM(**self.engine_kwargs)
        return self._llm

    def chat_template(self, messages: list[Message]) -> str:
        tok = self._engine().get_tokenizer()
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """One engine.generate call for the whole batch (vLLM schedules and batches on the GPU)."""
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        t0 = time.perf_counter()
        llm = self._engine()
        batch = build_vllm_batch(requests, self.chat_template, temperature=self.temperature, top_p=self.top_p,
                                 max_tokens=self.max_tokens, max_tokens_free=self.max_tokens_free,
                                 base_seed=self.seed, schema_level=self.schema_level, max_ops=self.max_ops)
        params = [SamplingParams(**b.sampling_kwargs(), structured_outputs=(
            StructuredOutputsParams(json=b.schema) if b.schema is not None else None)) for b in batch]
        outputs = llm.generate([b.prompt for b in batch], sampling_params=params, use_tqdm=False)
        texts = collect_texts(outputs, batch)
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.candidates += sum(len(t) for t in texts)
        self.stats.seconds += time.perf_counter() - t0
        return texts
