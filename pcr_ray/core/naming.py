"""Names for computed quantities: a stem from the dimension and the step number (`d2`, `v1`, `q3`).

The symbolic enumerator names its candidate steps this way, and the PRM rendering renames every computed
quantity this way (`pcr_ray.core.render`), so a gold trace (`F_net`, `Q_warm`) and a searched trace (`F4`,
`E2`) look alike to the PRM: it judges what a step computes from what, not what a writer called it.
"""

from __future__ import annotations

from functools import lru_cache

from pcr_ray.core.units import Dims, try_unit_info

# Output-name stems by dimension (readable traces; the step number keeps names unique).
STEM_UNITS = {
    "m": "d", "s": "t", "m/s": "v", "m/s^2": "a", "kg": "m", "N": "F", "J": "E", "W": "P", "Pa": "p",
    "C": "q", "V": "U", "A": "I", "ohm": "R", "Hz": "f", "kg*m/s": "mom", "K": "T", "USD": "c", "item": "n",
    "m^2": "area", "m^3": "vol", "rad/s": "w", "dimensionless": "r", "F": "cap", "T": "B", "mol": "mol",
}


@lru_cache(maxsize=4096)
def stem(dims: Dims | None) -> str:
    """The name stem of a dimension: 'd' for a length, 'v' for a speed, ..., 'q' for any other, 'x' if unknown."""
    if dims is None:
        return "x"
    for unit, s in STEM_UNITS.items():
        info = try_unit_info(unit)
        if info is not None and info.dims == dims:
            return s
    return "q"


def fresh_name(dims: Dims | None, index: int, taken: set[str]) -> str:
    """A new variable name for step `index` (0-based): the dimension's stem and the step number, unique in `taken`."""
    base = f"{stem(dims)}{index + 1}"
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name
