"""The generator protocol: batched `propose(requests) -> candidates` (raw strings; parsing is the search's job)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pcr_ray.core.trace import Given, Step

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
    """Anything with a batched propose(); the Ray pipeline passes thin proxies over actor handles."""

    def propose(self, requests: Sequence[ProposalRequest]) -> list[list[str]]:
        """One list of raw candidate strings per request, in request order."""
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


def uses_feedback(generator: Any) -> bool:
    """Whether retrying with feedback can change the generator's output (False for deterministic enumerators)."""
    return bool(getattr(generator, "uses_feedback", True))


def build_generator(cfg: Mapping[str, Any]) -> Generator:
    """A generator from a config mapping: cfg['kind'] in {enumerate, llamacpp, vllm, hf}; other keys go to it."""
    conf = dict(cfg)
    kind = conf.pop("kind", None) or conf.pop("name", None)
    if kind in ("enumerate", "enumerator"):
        from pcr_ray.generators.enumerate import EnumeratorGenerator

        return EnumeratorGenerator.from_config(conf)
    if kind in ("llamacpp", "llama_cpp", "smollm2"):
        from pcr_ray.generators.llamacpp import LlamaCppGenerator

        return LlamaCppGenerator.from_config(conf)
    if kind == "vllm":
        from pcr_ray.generators.vllm import VLLMGenerator

        return VLLMGenerator.from_config(conf)
    if kind == "hf":
        from pcr_ray.generators.hf import HFGenerator

        return HFGenerator.from_config(conf)
    raise ValueError(f"unknown generator kind {kind!r}; expected enumerate, llamacpp, vllm or hf")
