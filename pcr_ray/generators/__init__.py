"""Generators: the batched propose() protocol and its backends (enumerate, llamacpp, vllm); never imports Ray."""

from pcr_ray.generators.base import Generator, ProposalRequest, build_generator

__all__ = ["Generator", "ProposalRequest", "build_generator"]
