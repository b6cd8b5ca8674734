"""The generator protocol: batched `propose(requests) -> candidates` (raw strings; parsing is the search's job).

Backends register their class in `GENERATORS` under a kind (and its aliases); `build_generator(cfg)` looks the
kind up there. The package's `__init__` imports every module of pcr_ray/generators/, which fills the registry;
this module imports no backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from pcr_ray.core.trace import Given, Step
from pcr_ray.registry import Registry

MODES = ("step", "full", "python", "direct", "givens")


@dataclass(frozen=True)
class ProposalRequest:
    """One generation request: the problem, its givens, the trace so far, how many candidates, and feedback.

    mode: 'step' (next step or final answer declaration), 'full' (a whole trace), 'python' (a program that
    prints the answer), 'direct' (a bare answer), 'givens' (extract the givens of the problem text).
    `feedback` holds verifier diagnostics of rejected attempts (Diagnostic.feedback() lines).
    `target_unit` is the unit the answer is asked in ('' when unknown); `seed` varies the sampling.
    """

    problem_id: str
    problem_text: str
    givens: tuple[Given, ...] = ()
    steps: tuple[Step, ...] = ()
    k: int = 1
    feedback: tuple[str, ...] = ()
    mode: str = "step"
    target_unit: str = ""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"ProposalRequest.mode must be one of {MODES}, got {self.mode!r}")
        if self.k < 1:
            raise ValueError(f"ProposalRequest.k must be >= 1, got {self.k}")
        # accept lists at the boundary, store tuples (frozen and hashable-friendly)
        for name in ("givens", "steps", "feedback"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))


@runtime_checkable
class Generator(Protocol):
    """What the search calls: a batched propose(); the Ray pipeline passes thin proxies over actor handles.

    A generator may also offer `propose_counted(requests) -> (candidates, usage)` with one (prompt tokens,
    output tokens) pair per request (CountingGenerator; pcr_ray.search.usage falls back to propose() and zeros)
    and `uses_feedback` (read by uses_feedback(), True when absent).
    """

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """One list of raw candidate strings per request, in request order."""
        ...


@runtime_checkable
class CountingGenerator(Generator, Protocol):
    """A generator that reports the tokens of each request (the LLM backends and the actor proxies over them)."""

    def propose_counted(self, requests: Sequence[ProposalRequest]) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """propose() and the (prompt, output) tokens of each request."""
        ...


@dataclass
class GeneratorStats:
    """Counters a backend keeps: calls, requests, candidates, and seconds spent generating."""

    calls: int = 0
    requests: int = 0
    candidates: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "requests": self.requests, "candidates": self.candidates,
                "seconds": round(self.seconds, 4), **self.extra}


@runtime_checkable
class GeneratorBackend(Generator, Protocol):
    """The whole contract of a class registered in GENERATORS (what build_generator and pcr_ray.pipeline use).

    - `from_config(cfg)`: the backend from its `generator:` config, `kind` removed; an unknown key is an
      error (ValueError or TypeError) naming it.
    - `propose(requests)`: the Generator protocol. Optional: `propose_counted` (CountingGenerator).
    - `identity`: a JSON-able mapping naming the backend, its model and sampling settings (recorded with results).
    - `stats`: GeneratorStats, updated by every propose().
    - `uses_feedback`: whether a retry with the verifier's diagnostics can change the output (False for a
      deterministic backend: the search then does not retry).
    - `model_free` (class): no model to load; under `actors.generator.placement: auto` it is built inside each
      search worker instead of in a generator actor.
    - `async_engine` (class): served by pcr_ray.pipeline.actors.VLLMEngineActor, so the backend also offers the
      AsyncEngineGenerator methods; otherwise a GeneratorActor calls propose_counted/propose.
    """

    model_free: ClassVar[bool]
    async_engine: ClassVar[bool]
    uses_feedback: bool
    stats: GeneratorStats

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> GeneratorBackend: ...

    @property
    def identity(self) -> Mapping[str, Any]: ...


@runtime_checkable
class AsyncEngineGenerator(GeneratorBackend, Protocol):
    """A backend with `async_engine = True`: its engine started once, requests of many callers batched in it."""

    def start(self) -> None:
        """Load the model and start the engine now (the actor does so before it reports ready)."""
        ...

    def propose_counted_async(self, requests: Sequence[ProposalRequest]
                              ) -> Awaitable[tuple[list[list[str]], list[tuple[int, int]]]]:
        """propose_counted() as a coroutine, so that concurrent callers share the engine's batches."""
        ...

    def engine_pids(self) -> list[int]:
        """PIDs of the engine's processes."""
        ...


# the backend classes by kind; a module of pcr_ray/generators/ adds one with `@GENERATORS.register(kind, *aliases)`
GENERATORS: Registry[type[GeneratorBackend]] = Registry("generator kind")


def uses_feedback(generator: Any) -> bool:
    """Whether retrying with feedback can change the generator's output (False for deterministic enumerators)."""
    return bool(getattr(generator, "uses_feedback", True))


def generator_kind(cfg: Mapping[str, Any]) -> str:
    """The `kind` (else `name`) of a generator config, as written (an alias included)."""
    return str(cfg.get("kind") or cfg.get("name") or "")


def backend_of(cfg: Mapping[str, Any]) -> type[GeneratorBackend]:
    """The registered backend class a generator config's kind names (UnknownNameError listing the kinds)."""
    return GENERATORS.get(generator_kind(cfg))


def build_generator(cfg: Mapping[str, Any]) -> GeneratorBackend:
    """A generator from a config mapping: cfg['kind'] names a registered backend (GENERATORS: enumerate, llamacpp,
    vllm, hf, or an alias); the other keys go to its from_config."""
    backend = backend_of(cfg)
    conf = dict(cfg)
    if not conf.pop("kind", None):
        conf.pop("name", None)
    return backend.from_config(conf)
