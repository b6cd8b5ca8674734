"""Generators: the batched propose() protocol and its backends (enumerate, llamacpp, vllm, hf); never imports Ray.

Importing the package imports every module of its folder, so each backend's `@GENERATORS.register(kind, ...)`
runs: a new backend is one new module. Optional heavy dependencies (vllm, llama_cpp, torch, transformers) are
imported inside the backends' functions, so this costs none of them.
"""

import sys

from pcr_ray.generators.base import (
    GENERATORS,
    Generator,
    GeneratorBackend,
    ProposalRequest,
    backend_of,
    build_generator,
)
from pcr_ray.registry import import_submodules

import_submodules(sys.modules[__name__])

__all__ = ["GENERATORS", "Generator", "GeneratorBackend", "ProposalRequest", "backend_of", "build_generator"]
