"""A checkpoint's tokenizer through the `tokenizers` library alone: what PRM scoring asks of a transformers tokenizer.

transformers' fast tokenizers run this same `tokenizer.json` through the same library, setting its truncation and
padding per call; `PRMTokenizer` does exactly that for the calls scoring makes (`pcr_ray.prm.model.encode_pairs`,
`pcr_ray.prm.shared.make_packs`), without importing transformers. tests/test_prm_bert.py holds the two to the same ids.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"


class PRMTokenizer:
    """`tok(texts[, pairs], truncation=..., max_length=..., padding=..., return_tensors=...)` on a tokenizer.json."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        p = Path(folder)
        self.backend = Tokenizer.from_file(str(p / TOKENIZER_FILE))
        cfg = json.loads((p / CONFIG_FILE).read_text()) if (p / CONFIG_FILE).is_file() else {}
        self.truncation_side = str(cfg.get("truncation_side", "right"))
        self.padding_side = str(cfg.get("padding_side", "right"))
        self.pad_token = str(cfg.get("pad_token", "[PAD]"))
        self.pad_token_type_id = int(cfg.get("pad_token_type_id", 0))
        ids = {name: self.backend.token_to_id(str(cfg.get(name, default)))
               for name, default in (("cls_token", "[CLS]"), ("sep_token", "[SEP]"), ("pad_token", "[PAD]"))}
        if None in ids.values():
            raise ValueError(f"{p / TOKENIZER_FILE}: no id for {[k for k, v in ids.items() if v is None]}")
        self.cls_token_id, self.sep_token_id, self.pad_token_id = (ids["cls_token"], ids["sep_token"],
                                                                   ids["pad_token"])

    def __call__(self, text: str | Sequence[str], text_pair: str | Sequence[str] | None = None, *,
                 add_special_tokens: bool = True, truncation: bool | str = False, max_length: int | None = None,
                 padding: bool = False, return_tensors: str | None = None) -> dict[str, Any]:
        """As a transformers tokenizer: a list of texts (and of second texts) gives lists; one text, one encoding."""
        if isinstance(text, str):
            out = self([text], None if text_pair is None else [str(text_pair)], add_special_tokens=add_special_tokens,
                       truncation=truncation, max_length=max_length, padding=padding, return_tensors=return_tensors)
            return {k: v[0] for k, v in out.items()}
        b = self.backend
        if truncation:
            strategy = "longest_first" if truncation is True else str(truncation)
            b.enable_truncation(int(max_length or 512), stride=0, strategy=strategy, direction=self.truncation_side)
        else:
            b.no_truncation()
        if padding:
            b.enable_padding(direction=self.padding_side, pad_id=self.pad_token_id, pad_type_id=self.pad_token_type_id,
                             pad_token=self.pad_token)
        else:
            b.no_padding()
        inputs = list(zip(text, text_pair, strict=True)) if text_pair is not None else list(text)
        encs = b.encode_batch(inputs, add_special_tokens=add_special_tokens) if inputs else []
        out: dict[str, Any] = {"input_ids": [e.ids for e in encs], "token_type_ids": [e.type_ids for e in encs],
                               "attention_mask": [e.attention_mask for e in encs]}
        if return_tensors == "pt":
            import torch  # heavy: torch

            out = {k: torch.tensor(v, dtype=torch.long) for k, v in out.items()}
        elif return_tensors is not None:
            raise ValueError(f"return_tensors={return_tensors!r}: only 'pt' or None")
        return out


def load_prm_tokenizer(folder: str | os.PathLike[str]) -> PRMTokenizer | None:
    """A PRMTokenizer on `folder` when it holds a tokenizer.json; None when it does not (a slow-only tokenizer)."""
    return PRMTokenizer(folder) if (Path(folder) / TOKENIZER_FILE).is_file() else None
