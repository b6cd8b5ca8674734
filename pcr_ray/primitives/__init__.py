"""The primitive registry Σ: importing this package registers every family; REGISTRY is the single source of truth."""

from pcr_ray.primitives import arithmetic, constants  # noqa: F401  (registration side effects)
from pcr_ray.primitives.registry import REGISTRY, DimError, DomainError, Param, Primitive, families, register

__all__ = ["REGISTRY", "DimError", "DomainError", "Param", "Primitive", "families", "register"]
