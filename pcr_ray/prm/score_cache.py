"""ScoreCache: a least-recently-used map from a rendered (context, step) pair to its PRM logit, with hit counts."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence


def pair_key(context: str, step: str) -> bytes:
    """16 bytes naming a (context, step) text pair (a digest: a cache entry costs ~100 bytes, not the text)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(context.encode())
    h.update(b"\0")
    h.update(step.encode())
    return h.digest()


class ScoreCache:
    """Up to `size` logits by pair; size 0 keeps nothing. `hits`/`misses` count pairs asked for."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"prm.cache_size must be >= 0 (0: no cache), got {size}")
        self.size = int(size)
        self._d: OrderedDict[bytes, float] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def lookup(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float | None], list[bytes]]:
        """(cached logit or None per pair, key per pair); counts a hit per pair found, a miss per pair not."""
        keys = [pair_key(c, s) for c, s in pairs]
        found: list[float | None] = []
        for k in keys:
            v = self._d.get(k)
            if v is not None:
                self._d.move_to_end(k)
            found.append(v)
        n_hit = sum(v is not None for v in found)
        self.hits += n_hit
        self.misses += len(found) - n_hit
        return found, keys

    def store(self, keys: Sequence[bytes], logits: Sequence[float]) -> None:
        """Remember these logits, dropping the least recently used beyond `size`."""
        if not self.size:
            return
        for k, v in zip(keys, logits, strict=True):
            self._d[k] = float(v)
            self._d.move_to_end(k)
        while len(self._d) > self.size:
            self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)

    def stats(self) -> dict[str, float | int]:
        """{hits, misses, hit_rate, size, entries}; hit_rate is 0.0 before any lookup."""
        n = self.hits + self.misses
        return {"hits": self.hits, "misses": self.misses, "hit_rate": round(self.hits / n, 4) if n else 0.0,
                "size": self.size, "entries": len(self._d)}
