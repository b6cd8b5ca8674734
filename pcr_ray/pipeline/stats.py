"""Statistics of an evaluation (scipy): intervals of a proportion, AUROC, and paired tests between methods.

Every method runs on the same problems, so two methods are compared problem by problem: of the problems both
ran, `b` are right under the first and wrong under the second and `c` the other way round. The exact McNemar
test asks whether b and c differ more than chance would make them (a two-sided binomial test of b among b + c at
one half), and a paired bootstrap over the problems gives an interval of the accuracy difference. A difference
is significant at 5% only where the p-value is below 0.05; overlapping or not, two Wilson intervals say less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n ((0, 0) when n is 0)."""
    from scipy import stats  # heavy: scipy

    if n == 0:
        return 0.0, 0.0
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def auroc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """P(score of a random positive > score of a random negative), ties half: Mann-Whitney U / (n+ n-)."""
    from scipy import stats  # heavy: scipy

    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    u = stats.mannwhitneyu(np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64),
                           alternative="two-sided").statistic
    return float(u) / (len(pos) * len(neg))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of b against c discordant pairs (1.0 when there are none)."""
    from scipy import stats  # heavy: scipy

    if b + c == 0:
        return 1.0
    return float(stats.binomtest(int(min(b, c)), int(b + c), 0.5).pvalue)


def paired_bootstrap(a: Sequence[bool], b: Sequence[bool], *, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of mean(a) - mean(b) over the same problems, resampled together."""
    from scipy import stats  # heavy: scipy

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(x) < 2 or np.all(x == y):
        d = float(x.mean() - y.mean()) if len(x) else 0.0
        return d, d
    res = stats.bootstrap((x, y), lambda u, v, axis=-1: u.mean(axis=axis) - v.mean(axis=axis), paired=True,
                          n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=0.95, method="percentile",
                          rng=np.random.default_rng(seed), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired_comparisons(rows: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    """For every pair of methods, on the problems both ran: n, accuracies, the discordant counts (b: only the
    first right, c: only the second), the exact McNemar p-value, a bootstrap interval of the difference, and
    whether it is significant at ALPHA. Keyed "A vs B" in the order of `methods`."""
    right: dict[str, dict[str, bool]] = {m: {} for m in methods}
    for r in rows:
        m = str(r.get("method"))
        if m in right:
            right[m][str(r.get("problem_id"))] = bool(r.get("correct"))
    out: dict[str, Any] = {}
    for a, b in combinations(methods, 2):
        common = sorted(set(right[a]) & set(right[b]))
        xa, xb = [right[a][p] for p in common], [right[b][p] for p in common]
        n_b = sum(x and not y for x, y in zip(xa, xb, strict=True))
        n_c = sum(y and not x for x, y in zip(xa, xb, strict=True))
        p = mcnemar_exact(n_b, n_c)
        lo, hi = paired_bootstrap(xa, xb)
        n = len(common)
        out[f"{a} vs {b}"] = {"a": a, "b": b, "n": n, "acc_a": sum(xa) / n if n else None,
                              "acc_b": sum(xb) / n if n else None, "diff": (sum(xa) - sum(xb)) / n if n else None,
                              "only_a": n_b, "only_b": n_c, "mcnemar_p": round(p, 6), "diff_ci95": [lo, hi],
                              "significant": p < ALPHA}
    return out


def paired_table(paired: Mapping[str, Any]) -> str:
    """The paired comparisons in markdown: one row per pair."""
    lines = ["| A vs B | n | A right, B wrong | B right, A wrong | Acc A - B (pts) | 95% CI (pts) | McNemar p | "
             "at 5% |", "|---|---|---|---|---|---|---|---|"]
    for key, d in paired.items():
        diff = "-" if d["diff"] is None else f"{100 * d['diff']:+.1f}"
        lo, hi = d["diff_ci95"]
        lines.append(f"| {key} | {d['n']} | {d['only_a']} | {d['only_b']} | {diff} | {100 * lo:+.1f} to "
                     f"{100 * hi:+.1f} | {d['mcnemar_p']:.3g} | {'significant' if d['significant'] else 'no'} |")
    return "\n".join(lines)
