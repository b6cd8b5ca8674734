"""The primitive registry Σ: importing this package registers every family; REGISTRY is the single source."""

from pcr_ray.core.primitives import (  # noqa: F401  (registration side effects)
    algebra,
    arithmetic,
    circuits,
    constants,
    dynamics,
    energy,
    explog,
    finance,
    kinematics,
    thermo,
    trig,
    waves,
)
from pcr_ray.core.primitives.registry import REGISTRY, DimError, DomainError, Param, Primitive, families, register

__all__ = ["REGISTRY", "DimError", "DomainError", "Param", "Primitive", "families", "register"]
