"""Helpers for the PRM tests: small real pair sets from generated traces, tiny backbones built from configs, and the
test-size trained PRM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pcr_ray.negatives.pairs import PairConfig, pairs_from_problems
from tests.trace_factory import random_trace

# The test-size quick PRM: the quick recipe's code path (CSP pairs from generated physics gold traces, the
# shared-context MiniLM, the listwise loss) on a few pairs, so it trains in well under a minute on 2 cores and is
# cached per user like the quick one (pcr_ray.prm.checkpoints.ensure_checkpoint, keyed by this recipe). For the tests
# that need *a* trained PRM of the shipped kind and whose assertions do not depend on how well it ranks; the quick
# recipe's quality is a benchmark's business (benchmarks/bench_prm.py, bench_solve.py).
SMALL_PRM_RECIPE: dict[str, Any] = {"budget_pairs": 96, "val_pairs": 16,
                                    "sources": ({"name": "physics", "kwargs": {"n": 40, "seed": 7919}},)}


def small_prm_checkpoint() -> Path:
    """The test-size quick PRM's folder (trained on first use, cached per user)."""
    from pcr_ray.prm.checkpoints import ensure_checkpoint  # heavy: torch

    return ensure_checkpoint("csp", **SMALL_PRM_RECIPE)


def small_prm_scorer(**kwargs: Any):
    """A PRMScorer over the test-size PRM: ONNX Runtime int8, as the pipeline scores on a CPU."""
    from pcr_ray.prm.scorer import PRMScorer  # heavy: torch

    return PRMScorer.from_checkpoint(small_prm_checkpoint(), runtime="onnx", int8=True, **kwargs)


TEXT = "Problem {i}: use the givens to compute the requested quantity step by step."


def problem_rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Problem rows (Problem.to_dict() shape) whose gold traces are seeded random registry walks."""
    return [{"id": f"gen/{i}", "source": "generated", "text": TEXT.format(i=i),
             "gold_trace": random_trace(i).to_dict()} for i in range(start, start + n)]


def small_pairs(n_problems: int, kinds: tuple[str, ...] = ("principle_swap", "variable_substitution"),
                start: int = 0) -> list[dict[str, Any]]:
    return pairs_from_problems(problem_rows(n_problems, start), PairConfig(kinds=kinds, csp_per_kind=1))


def tiny_backbone(path: Path, arch: str = "bert") -> Path:
    """Save a tiny randomly initialised encoder (BERT or DeBERTa-v2) with the MiniLM tokenizer at `path`."""
    from transformers import AutoModel, AutoTokenizer, BertConfig, DebertaV2Config

    from pcr_ray.prm.model import minilm_path

    common = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 64, "max_position_embeddings": 512}
    cfg = BertConfig(**common) if arch == "bert" else DebertaV2Config(**common, type_vocab_size=0)
    model = AutoModel.from_config(cfg)
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(str(minilm_path())).save_pretrained(path)
    return path
