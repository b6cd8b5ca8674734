"""Paired statistics between methods (scipy): exact McNemar, paired bootstrap, Wilson, AUROC, and where they show."""

from __future__ import annotations

import pytest

from pcr_ray.pipeline.metrics import compute_metrics
from pcr_ray.pipeline.stats import auroc, mcnemar_exact, paired_bootstrap, paired_comparisons, paired_table, wilson


def test_exact_mcnemar_against_known_values():
    # a 2-of-12 difference (2 discordant, both one way) is no evidence at all: p = 0.5
    assert mcnemar_exact(2, 0) == pytest.approx(0.5)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(10, 2) == pytest.approx(0.0385742, abs=1e-6)  # 2 * P(X <= 2), X ~ Bin(12, 1/2)
    assert mcnemar_exact(5, 5) == 1.0


def test_wilson_and_auroc_match_their_definitions():
    lo, hi = wilson(5, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634) and wilson(0, 0) == (0.0, 0.0)
    assert auroc([0.9, 0.8], [0.1, 0.2]) == 1.0 and auroc([0.5, 0.5], [0.5]) == 0.5
    assert auroc([0.3, 0.7], [0.5]) == 0.5 and auroc([], [0.1]) != auroc([], [0.1])  # nan


def test_paired_bootstrap_brackets_the_difference():
    a = [True, True, False, True, False, True] * 10
    b = [False, True, False, False, False, True] * 10
    lo, hi = paired_bootstrap(a, b)
    assert lo < 2 / 6 < hi and lo > 0  # a is right on 20 more of 60
    assert paired_bootstrap(a, a) == (0.0, 0.0)


def _rows(spec: dict[str, str]) -> list[dict]:
    """{method: '1101...'} -> result rows, one per problem (1: correct)."""
    return [{"problem_id": f"p{i}", "method": m, "correct": c == "1"} for m, bits in spec.items()
            for i, c in enumerate(bits)]


def test_paired_comparisons_in_metrics_and_the_table():
    rows = _rows({"nsprm": "111111111111", "verifier_only": "111111111100", "prm_only": "000000000000"})
    m = compute_metrics(rows, ["nsprm", "verifier_only", "prm_only"])
    p = m["paired"]
    assert list(p) == ["nsprm vs verifier_only", "nsprm vs prm_only", "verifier_only vs prm_only"]
    small = p["nsprm vs verifier_only"]
    assert (small["n"], small["only_a"], small["only_b"]) == (12, 2, 0)
    assert small["mcnemar_p"] == pytest.approx(0.5) and not small["significant"]
    big = p["nsprm vs prm_only"]
    assert big["only_a"] == 12 and big["significant"] and big["diff"] == 1.0
    table = paired_table(p)
    assert "| nsprm vs verifier_only | 12 | 2 | 0 | +16.7 |" in table and "| no |" in table
    assert "significant" in table


def test_pairs_count_only_the_problems_both_methods_ran():
    rows = _rows({"a": "1111", "b": "00"})
    d = paired_comparisons(rows, ["a", "b"])["a vs b"]
    assert d["n"] == 2 and d["only_a"] == 2
