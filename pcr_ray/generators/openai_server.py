"""A model behind an OpenAI-compatible server (`generator=openai`): vLLM, SGLang, TGI, llama.cpp's server, an API.

Through the `openai` client package (extra `openai`). The prompts and JSON schemas are the other LLM backends'
(`build_call`); JSON modes ask for structured output in the form the server takes (`structured`): OpenAI's
`response_format={"type": "json_schema", ...}` (OpenAI, vLLM, SGLang) or `{"type": "json_object", "schema": ...}`
(llama.cpp's server). k samples per request are k seeded requests (any server; each sample reproducible), or one
request with n = k (`n_per_request`). Up to `concurrency` HTTP requests run at once, retried by the client
(pcr_ray.openai_client); what still fails raises ServerError naming the server, the status and its message, which
the pipeline turns into that problem's error row while the batch goes on. An output cut at max_tokens or not
matching its schema is returned as it is and the search rejects it as malformed, like any bad candidate
(truncations are counted in stats).

The API key comes from the environment variable `api_key_env`; it is never in a config, an identity or a log.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from typing import Any, ClassVar

from pcr_ray.configs import OpenAIGeneratorConfig
from pcr_ray.generators.base import GENERATORS, GeneratorStats, ProposalRequest
from pcr_ray.generators.llm_common import LLMCall, build_call, clean_output
from pcr_ray.generators.prompts import PROMPTS, Message
from pcr_ray.openai_client import ServerClient, ServerError

DEFAULTS = OpenAIGeneratorConfig  # the defaults of every option: the schema of its kind states them
APIS = ("chat", "completions")
STRUCTURED = ("json_schema", "json_object", "none")
__all__ = ["OpenAIServerGenerator", "ServerError"]

def response_format(schema: Mapping[str, Any] | None, structured: str) -> dict[str, Any] | None:
    """The `response_format` of a request whose output must match `schema`, in the form the server takes."""
    if schema is None or structured == "none":
        return None
    if structured == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    # not `strict`: OpenAI's strict mode refuses schemas with optional fields, which a step's schema has
    return {"type": "json_schema", "json_schema": {"name": "pcr_ray_output", "schema": dict(schema)}}


def completion_prompt(messages: Sequence[Message]) -> str:
    """The chat messages as one plain-text prompt (api=completions: a model without a chat template)."""
    return "\n\n".join(m["content"] for m in messages) + "\n\n"


@GENERATORS.register("openai", "openai_compatible")
class OpenAIServerGenerator:
    """Batched propose() over an OpenAI-compatible HTTP server; one client per process, requests run concurrently."""

    uses_feedback = True
    model_free: ClassVar[bool] = True  # nothing to load: under placement auto, each search worker holds a client
    async_engine: ClassVar[bool] = False

    def __init__(self, base_url: str = DEFAULTS.base_url, *, model: str = DEFAULTS.model,
                 api_key_env: str = DEFAULTS.api_key_env, api: str = DEFAULTS.api,
                 structured: str = DEFAULTS.structured, n_per_request: bool = DEFAULTS.n_per_request,
                 temperature: float = DEFAULTS.temperature, top_p: float = DEFAULTS.top_p, seed: int = DEFAULTS.seed,
                 stop: Sequence[str] = (), max_tokens: int = DEFAULTS.max_tokens,
                 max_tokens_free: int = DEFAULTS.max_tokens_free, schema_level: str = DEFAULTS.schema_level,
                 max_ops: int = DEFAULTS.max_ops, prompt: str = DEFAULTS.prompt,
                 concurrency: int = DEFAULTS.concurrency, timeout_s: float = DEFAULTS.timeout_s,
                 max_retries: int = DEFAULTS.max_retries) -> None:
        if api not in APIS:
            raise ValueError(f"openai generator: api must be one of {APIS}, got {api!r}")
        if structured not in STRUCTURED:
            raise ValueError(f"openai generator: structured must be one of {STRUCTURED}, got {structured!r}")
        if prompt not in PROMPTS:
            raise ValueError(f"openai generator: prompt must be one of {PROMPTS}, got {prompt!r}")
        if concurrency < 1:
            raise ValueError(f"openai generator: concurrency must be >= 1, got {concurrency}")
        self.base_url, self.api, self.structured, self.n_per_request = base_url, api, structured, n_per_request
        self.temperature, self.top_p, self.seed, self.stop = temperature, top_p, seed, list(stop)
        self.max_tokens, self.max_tokens_free = max_tokens, max_tokens_free
        self.schema_level, self.max_ops, self.prompt = schema_level, max_ops, prompt
        self.concurrency = concurrency
        self.server = ServerClient(base_url, api_key_env=api_key_env, timeout_s=timeout_s, max_retries=max_retries,
                                   extra="generator=openai")
        self._model = model
        self.stats = GeneratorStats()
        self.stats.extra.update({"prompt_tokens": 0, "output_tokens": 0, "truncated": 0, "http_requests": 0})

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> OpenAIServerGenerator:
        kw = {k: v for k, v in cfg.items() if k not in ("kind", "name", "description") and v is not None}
        known = {f.name for f in fields(OpenAIGeneratorConfig)} - {"kind"}
        unknown = sorted(set(kw) - known)
        if unknown:
            raise ValueError(f"unknown openai generator option(s) {unknown}; it takes {sorted(known)}")
        return cls(**kw)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "openai", "base_url": self.base_url, "model": self._model or "(the server's first)",
                "api": self.api, "structured": self.structured, "temperature": self.temperature,
                "prompt": self.prompt, "schema_level": self.schema_level}

    # -- the client -----------------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The `openai.OpenAI` client (pcr_ray.openai_client.ServerClient)."""
        return self.server.client

    @property
    def model(self) -> str:
        """The served model's name: the configured one, else the first the server lists."""
        if not self._model:
            self._model = self.server.first_model()
        return self._model

    # -- one HTTP request ------------------------------------------------------------------------------------

    def _request(self, call: LLMCall, mode: str, n: int, seed: int) -> tuple[list[str], int, int, int]:
        """n outputs of one HTTP request: (texts, prompt tokens, output tokens, truncated outputs)."""
        kw: dict[str, Any] = {"model": self.model, "temperature": self.temperature, "top_p": self.top_p,
                              "seed": seed, "n": n, "max_tokens": self.max_tokens if mode == "step"
                              else self.max_tokens_free}
        if self.stop:
            kw["stop"] = self.stop
        fmt = response_format(call.schema, self.structured)
        if self.api == "chat":
            if fmt is not None:
                kw["response_format"] = fmt
            r = self.server.call(lambda: self.client.chat.completions.create(messages=call.messages, **kw))
            texts = [c.message.content or "" for c in r.choices]
        else:
            if fmt is not None:  # not in OpenAI's completions API: vLLM reads it as an extra field
                kw["extra_body"] = {"response_format": fmt}
            r = self.server.call(lambda: self.client.completions.create(prompt=completion_prompt(call.messages), **kw))
            texts = [c.text or "" for c in r.choices]
        if len(texts) != n:
            raise ServerError(f"{self.base_url}: asked for {n} outputs, got {len(texts)}")
        truncated = sum(c.finish_reason == "length" for c in r.choices)
        usage = r.usage
        return ([clean_output(t, mode) for t in texts], int(getattr(usage, "prompt_tokens", 0) or 0),
                int(getattr(usage, "completion_tokens", 0) or 0), truncated)

    def _jobs(self, requests: Sequence[ProposalRequest]) -> list[tuple[int, LLMCall, str, int, int]]:
        """The HTTP requests of a batch: (request index, call, mode, n, seed); k seeded ones each, or one with n = k."""
        jobs = []
        for i, req in enumerate(requests):
            call = build_call(req, base_seed=self.seed, schema_level=self.schema_level, max_ops=self.max_ops,
                              prompt=self.prompt)
            if self.n_per_request:
                jobs.append((i, call, req.mode, len(call.seeds), call.seeds[0]))
            else:
                jobs += [(i, call, req.mode, 1, seed) for seed in call.seeds]
        return jobs

    # -- the Generator protocol ------------------------------------------------------------------------------

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """k samples per request, `concurrency` requests in flight."""
        return self.propose_counted(requests)[0]

    def propose_counted(self, requests: Sequence[ProposalRequest]) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """propose() and each request's (prompt, output) tokens as the server reports them (`usage`)."""
        t0 = time.perf_counter()
        _ = self.model  # one lookup before the threads start
        jobs = self._jobs(requests)
        with ThreadPoolExecutor(max_workers=min(self.concurrency, max(1, len(jobs)))) as pool:
            results = list(pool.map(lambda j: self._request(*j[1:]), jobs))
        out: list[list[str]] = [[] for _ in requests]
        tokens = [[0, 0] for _ in requests]
        for (i, *_), (texts, n_in, n_out, _cut) in zip(jobs, results, strict=True):
            out[i] += texts
            tokens[i][0] += n_in
            tokens[i][1] += n_out
        usage = [(a, b) for a, b in tokens]
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.candidates += sum(len(t) for t in out)
        self.stats.seconds += time.perf_counter() - t0
        extra = self.stats.extra
        extra["prompt_tokens"] += sum(a for a, _ in usage)
        extra["output_tokens"] += sum(b for _, b in usage)
        extra["truncated"] += sum(r[3] for r in results)
        extra["http_requests"] += len(jobs)
        return out, usage

