"""The primitive registry Σ: importing this package imports every family module of its folder, which registers its
primitives; REGISTRY is the single source (a new family is one new module here)."""

import sys

from pcr_ray.core.primitives.registry import REGISTRY, DimError, DomainError, Param, Primitive, families, register
from pcr_ray.registry import import_submodules

import_submodules(sys.modules[__name__])

__all__ = ["REGISTRY", "DimError", "DomainError", "Param", "Primitive", "families", "register"]
