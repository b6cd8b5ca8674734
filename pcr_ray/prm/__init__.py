"""The process reward model: rendering, cross-encoder, training loop, scorer and checkpoints (no Ray here)."""

import os as _os

# OpenMP threads that spin while waiting make torch 10-100x slower on a busy 2-core machine (measured here);
# passive waiting costs nothing measurable otherwise. Only effective when torch is not imported yet.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
