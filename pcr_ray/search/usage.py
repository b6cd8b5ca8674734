"""Token counts of generator and PRM calls, from the backends that report them (0 from those that cannot).

A generator that counts tokens offers `propose_counted(requests) -> (candidates, usage)`, usage one
(prompt tokens, output tokens) pair per request (llama.cpp, vLLM and the actor proxies over them); the symbolic
enumerator has no tokens. A PRM that counts offers `score_counted(pairs) -> (scores, tokens)`, tokens one count
per pair: the tokens its encoder takes in for that pair (PRMScorer, CausalLMPRM, the PRM actor proxy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def propose_counted(generator: Any, requests: Sequence[Any]) -> tuple[list[list[str]], list[tuple[int, int]]]:
    """`generator.propose(requests)` and the (prompt, output) tokens of each request ((0, 0) when not reported)."""
    counted = getattr(generator, "propose_counted", None)
    if counted is not None:
        outs, usage = counted(list(requests))
        return list(outs), [(int(a), int(b)) for a, b in usage]
    outs = generator.propose(list(requests))
    return list(outs), [(0, 0)] * len(outs)


def score_counted(scorer: Any, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
    """`scorer.score(pairs)` and the tokens the PRM encodes for each pair (0 when it does not say)."""
    counted = getattr(scorer, "score_counted", None)
    if counted is not None:
        scores, tokens = counted(list(pairs))
        return list(scores), [int(t) for t in tokens]
    scores = scorer.score(list(pairs))
    return list(scores), [0] * len(pairs)
