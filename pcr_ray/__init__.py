"""pcr_ray: Ray-based batch evaluation of neuro-symbolic process reward models."""

__version__ = "0.1.0"
