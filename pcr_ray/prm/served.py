"""A process reward model behind a server's pooling endpoint (`prm=openai_reward`), behind PRMScorer's interface.

The server is vLLM serving a PRM with a step pooler, e.g. `vllm serve Qwen/Qwen2.5-Math-PRM-7B --runner pooling`:
each (context, step) pair is one chat request to `POST /pooling` (beside the /v1 root) in the qwen_prm convention
(pcr_ray.prm.step_text: the question as the user turn, the steps as the assistant's, `<extra_0>` after each), task
`token_classify`; the server returns, for every `<extra_0>` (its `step_tag_id`), the two classes' probabilities,
and the candidate's score is the last one's P(class 1). Up to `concurrency` requests run at once, through the
`openai` client's retries and timeouts (pcr_ray.openai_client); a request that still fails, or an answer that is
not one score per step, raises ServerError with the server's message, which the pipeline turns into that
problem's error row while the batch goes on. Token counts are the server's (`usage.prompt_tokens`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pcr_ray.openai_client import ServerClient, ServerError
from pcr_ray.prm.base import sigmoid
from pcr_ray.prm.score_cache import ScoreCache
from pcr_ray.prm.step_text import chat_messages, split_context

SEPARATORS = {"qwen_prm": "<extra_0>"}  # the conventions a pooling server scores: the step tag after each step
TINY = 1e-12  # a probability of exactly 0 or 1 becomes log-odds of about -+27.6


class ServedPRM:
    """A PRM on an HTTP server scoring (context, step) pairs at the candidate's step tag: score() in [0, 1]."""

    def __init__(self, base_url: str, *, model: str = "", convention: str = "qwen_prm",
                 api_key_env: str = "OPENAI_API_KEY", concurrency: int = 8, timeout_s: float = 60.0,
                 max_retries: int = 4, cache_size: int = 0) -> None:
        if convention not in SEPARATORS:
            raise ValueError(f"prm=openai_reward scores the {sorted(SEPARATORS)} convention (a pooling server's step "
                             f"tags), got prm.convention={convention!r}")
        if concurrency < 1:
            raise ValueError(f"prm.server.concurrency must be >= 1, got {concurrency}")
        self.separator = SEPARATORS[convention]
        self.server = ServerClient(base_url, api_key_env=api_key_env, timeout_s=timeout_s, max_retries=max_retries,
                                   extra="prm=openai_reward")
        self.concurrency = concurrency
        self._model = model
        self._lock = threading.Lock()
        self.cache = ScoreCache(cache_size)
        self.token_cache = ScoreCache(cache_size)  # the server's prompt tokens of each cached pair
        self.identity: dict[str, Any] = {"family": "openai_reward", "convention": convention, "base_url": base_url,
                                         "model": model or "(the server's first)"}
        self.calls = 0
        self.pairs_scored = 0
        self.http_requests = 0

    @classmethod
    def from_config(cls, prm_cfg: Mapping[str, Any], model: str = "", **kw: Any) -> ServedPRM:
        """The scorer of a `prm:` config of family openai_reward; `model` the served name (its `checkpoint`)."""
        server = dict(prm_cfg.get("server") or {})
        known = {"base_url", "api_key_env", "concurrency", "timeout_s", "max_retries"}
        unknown = sorted(set(server) - known)
        if unknown:
            raise ValueError(f"unknown prm.server option(s) {unknown}; it takes {sorted(known)}")
        base_url = server.pop("base_url", "http://127.0.0.1:8000/v1")
        return cls(base_url, model=model, convention=str(prm_cfg.get("convention") or "qwen_prm"), **server, **kw)

    @property
    def model(self) -> str:
        """The served model's name: the configured one, else the first the server lists."""
        with self._lock:
            if not self._model:
                self._model = self.server.first_model()
                self.identity["model"] = self._model
            return self._model

    def _request(self, pair: tuple[str, str]) -> tuple[float, int]:
        """(log-odds that the pair's step is right, the server's prompt tokens) from one POST /pooling."""
        context, step = pair
        body = {"model": self.model, "messages": chat_messages(context, step, self.separator),
                "add_generation_prompt": False, "task": "token_classify"}
        client = self.server.client
        out = self.server.call(lambda: client.post(f"{self.server.root}/pooling", body=body, cast_to=object))
        steps = len(split_context(context)[1]) + 1
        rows = _step_rows(out)
        if len(rows) != steps or any(len(r) != 2 for r in rows):
            raise ServerError(f"{self.server.base_url}: /pooling gave {len(rows)} step score(s) of "
                              f"{[len(r) for r in rows][:4]} class(es) for a trace of {steps} step(s); serve a "
                              f"two-class process reward model whose step_tag_id is the token {self.separator} "
                              f"(vllm serve MODEL --runner pooling --pooler-config '{{\"step_tag_id\": ID}}')")
        p0, p1 = (min(max(float(x), TINY), 1.0 - TINY) for x in rows[-1])
        tokens = int(((out.get("usage") or {}).get("prompt_tokens")) or 0)
        return math.log(p1) - math.log(p0), tokens

    def counted_logits(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
        """Log-odds that each pair's step is right and its prompt tokens, in input order; cached pairs are not sent
        again."""
        pairs = list(pairs)
        for i, p in enumerate(pairs):
            if not (isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(x, str) for x in p)):
                raise TypeError(f"pair {i} is not a (context, step) tuple of strings")
        if not pairs:
            return [], []
        self.calls += 1
        self.pairs_scored += len(pairs)
        found, keys = self.cache.lookup(pairs)
        counts, _ = self.token_cache.lookup(pairs)
        todo = [i for i, v in enumerate(found) if v is None or counts[i] is None]
        _ = self.model  # one lookup before the threads start
        with ThreadPoolExecutor(max_workers=min(self.concurrency, max(1, len(todo)))) as pool:
            fresh = list(pool.map(lambda i: self._request(tuple(pairs[i])), todo))
        self.http_requests += len(todo)
        self.cache.store([keys[i] for i in todo], [x for x, _ in fresh])
        self.token_cache.store([keys[i] for i in todo], [float(n) for _, n in fresh])
        got = dict(zip(todo, fresh, strict=True))
        return ([got[i][0] if i in got else float(v) for i, v in enumerate(found)],
                [got[i][1] if i in got else int(counts[i]) for i in range(len(pairs))])

    def logits(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Log-odds that each pair's step is right, in input order."""
        return self.counted_logits(pairs)[0]

    def score_counted(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
        """score(pairs) and the server's prompt tokens of each pair (pcr_ray.search.usage)."""
        logits, tokens = self.counted_logits(pairs)
        return [sigmoid(x) for x in logits], tokens

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(the step is right) in [0, 1] for each (context, step)."""
        return self.score_counted(pairs)[0]


def _step_rows(out: Any) -> list[list[float]]:
    """The per-step class probabilities of a /pooling answer for one input (`data[0].data`); [] when absent."""
    try:
        rows = out["data"][0]["data"]
    except (KeyError, IndexError, TypeError):
        return []
    if not isinstance(rows, list):
        return []
    return [r if isinstance(r, list) else [r] for r in rows]
