"""Off-the-shelf PRMs that are causal LMs scoring a step at a separator token, behind PRMScorer's interface.

Two conventions, the ones the published PRMs use:
- `qwen_prm` (Qwen2.5-Math-PRM-7B/72B): the question as the user turn, the steps as the assistant turn, each
  step followed by `<extra_0>`; the model's two-class head gives, at each separator, the probability that the step
  is right (class 1). Loaded with its own code (`trust_remote_code`) where the checkpoint brings it, else as a
  token-classification model of the same architecture.
- `math_shepherd` (Math-Shepherd, RLHFlow's PRMs): `question step 1 ки step 2 ки ...`; at each `ки` the LM's
  logits of the `+` and `-` tokens, softmaxed, give P(+).

Our (context, step) pairs (pcr_ray.core.render: `problem | givens: ... | steps: s1; s2`) are taken apart into the
question (the problem and its givens) and natural-language steps (the prefix's, then the candidate), and the
score is the one at the last separator: the candidate's. `logits` returns log-odds, so that sigmoid(logit) is the
probability, as for PRMScorer; identity, a score cache and the same error messages come with it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pcr_ray.prm.base import sigmoid
from pcr_ray.prm.score_cache import ScoreCache
from pcr_ray.prm.step_text import chat_messages, natural_step, split_context

__all__ = ["CONVENTIONS", "CausalLMPRM", "Convention", "chat_messages", "natural_step", "split_context"]


@dataclass(frozen=True)
class Convention:
    """How a PRM family marks and scores steps."""

    separator: str
    good: str = ""  # math_shepherd: the token whose probability is the step's (against `bad`)
    bad: str = ""
    chat: bool = False  # qwen_prm: the question and steps as chat turns


CONVENTIONS: dict[str, Convention] = {
    "qwen_prm": Convention(separator="<extra_0>", chat=True),
    "math_shepherd": Convention(separator="ки", good="+", bad="-"),
}
class CausalLMPRM:
    """A causal-LM PRM scoring (context, step) pairs at the candidate's separator: score() in [0, 1]."""

    def __init__(self, model: Any, tokenizer: Any, convention: str, *, device: str = "cpu", max_length: int = 2048,
                 max_batch: int = 8, cache_size: int = 0, identity: dict[str, Any] | None = None) -> None:
        if convention not in CONVENTIONS:
            raise ValueError(f"prm.convention must be one of {sorted(CONVENTIONS)}, got {convention!r}")
        self.conv = CONVENTIONS[convention]
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.max_length = int(max_length)
        self.max_batch = int(max_batch)
        self.sep_id = self._token_id(self.conv.separator)
        self.good_id = self._token_id(self.conv.good) if self.conv.good else None
        self.bad_id = self._token_id(self.conv.bad) if self.conv.bad else None
        self.cache = ScoreCache(cache_size)
        self.identity: dict[str, Any] = {"family": "causal_lm", "convention": convention, "device": device,
                                         **dict(identity or {})}
        self.calls = 0
        self.pairs_scored = 0

    def _token_id(self, token: str) -> int:
        ids = self.tokenizer.encode(token, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(f"the tokenizer does not hold {token!r} as one token ({ids}): a {self.identity_name()} "
                             f"PRM needs it")
        return int(ids[0])

    def identity_name(self) -> str:
        return "Qwen2.5-Math-PRM-style" if self.conv.chat else "Math-Shepherd-style"

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str], convention: str, *, device: str = "cpu",
                        dtype: str = "auto", **kw: Any) -> CausalLMPRM:
        """Load a folder or hub name; bf16 on a GPU when dtype is auto, fp32 on a CPU."""
        from transformers import (  # heavy: transformers
            AutoConfig,
            AutoModel,
            AutoModelForCausalLM,
            AutoModelForTokenClassification,
            AutoTokenizer,
        )

        if convention not in CONVENTIONS:
            raise ValueError(f"prm.convention must be one of {sorted(CONVENTIONS)}, got {convention!r}")
        torch_dtype = (torch.bfloat16 if str(device).startswith("cuda") else torch.float32) if dtype == "auto" \
            else getattr(torch, dtype)
        config = AutoConfig.from_pretrained(str(path), trust_remote_code=True)
        if convention == "math_shepherd":
            loader = AutoModelForCausalLM
        elif getattr(config, "auto_map", None) and "AutoModel" in config.auto_map:
            loader = AutoModel  # the checkpoint's own process-reward head (Qwen2ForProcessRewardModel)
        else:
            loader = AutoModelForTokenClassification
        model = loader.from_pretrained(str(path), dtype=torch_dtype, trust_remote_code=True).to(device)
        tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=True)
        return cls(model, tok, convention, device=device,
                   identity={"checkpoint": str(Path(str(path)).expanduser()) if Path(str(path)).exists() else str(path),
                             "dtype": str(torch_dtype).replace("torch.", "")}, **kw)

    def text(self, context: str, step: str) -> str:
        """The model's input for one pair: the question, then each step followed by the separator."""
        if self.conv.chat:
            msgs = chat_messages(context, step, self.conv.separator)
            if getattr(self.tokenizer, "chat_template", None):
                return str(self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False))
            return "\n".join(m["content"] for m in msgs)
        question, prefix = split_context(context)
        return question + " " + " ".join(f"{natural_step(s)} {self.conv.separator}" for s in [*prefix, step])

    def separator_positions(self, input_ids: torch.Tensor) -> list[int]:
        """The position of the last separator in each row (the candidate's); ValueError when a row has none."""
        out = []
        for row in input_ids:
            where = (row == self.sep_id).nonzero().flatten()
            if len(where) == 0:
                raise ValueError("an input lost its last separator to max_length truncation: raise prm.max_length")
            out.append(int(where[-1]))
        return out

    def _forward(self, texts: list[str]) -> list[float]:
        self.tokenizer.truncation_side = "left"  # keep the candidate (the end) when a long context is cut
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length)
        enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        pos = self.separator_positions(enc["input_ids"])
        with torch.inference_mode():
            out = self.model(**enc)
        logits = out.logits if hasattr(out, "logits") else out[0]
        rows = torch.arange(len(texts), device=logits.device)
        at = logits[rows, torch.tensor(pos, device=logits.device)].float()
        if self.conv.chat:  # two classes: log-odds of class 1 (the step is right)
            return (at[:, 1] - at[:, 0]).cpu().tolist()
        return (at[:, self.good_id] - at[:, self.bad_id]).cpu().tolist()  # log-odds of '+' against '-'

    def logits(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Log-odds that each pair's step is right, in input order; cached pairs are not scored again."""
        pairs = list(pairs)
        for i, p in enumerate(pairs):
            if not (isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(x, str) for x in p)):
                raise TypeError(f"pair {i} is not a (context, step) tuple of strings")
        if not pairs:
            return []
        self.calls += 1
        self.pairs_scored += len(pairs)
        found, keys = self.cache.lookup(pairs)
        todo = [i for i, v in enumerate(found) if v is None]
        fresh: list[float] = []
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        for s in range(0, len(todo), self.max_batch):
            fresh += self._forward([self.text(*pairs[i]) for i in todo[s:s + self.max_batch]])
        self.cache.store([keys[i] for i in todo], fresh)
        got = dict(zip(todo, fresh, strict=True))
        return [got[i] if v is None else float(v) for i, v in enumerate(found)]

    def token_counts(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        """The tokens of each pair's model input (question, steps and separators), cut at max_length."""
        self.tokenizer.truncation_side = "left"
        enc = self.tokenizer([self.text(*p) for p in pairs], truncation=True, max_length=self.max_length)
        return [len(ids) for ids in enc["input_ids"]]

    def score_counted(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
        """score(pairs) and token_counts(pairs) (pcr_ray.search.usage)."""
        return self.score(pairs), self.token_counts(list(pairs))

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(the step is right) in [0, 1] for each (context, step)."""
        return [sigmoid(x) for x in self.logits(pairs)]
