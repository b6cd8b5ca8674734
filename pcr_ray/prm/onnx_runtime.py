"""ONNX Runtime scoring of a PRM checkpoint: ONNX export and int8 quantization, cached per checkpoint content.

`exported(path)` writes `cache_dir()/prm_onnx/<key>/` once per checkpoint (the key hashes the checkpoint's files,
this export's format and the torch and onnxruntime versions): `model_fp32.onnx` (torch.onnx.export) and
`model_int8.onnx` (onnxruntime.quantization.quantize_dynamic, int8 weights per output channel). `OnnxPRM` is an
ONNX Runtime session on one of them, called with the tokenizer's tensors like PRMModel.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pcr_ray.paths import build_once, cache_dir
from pcr_ray.prm.base import ENCODER_DIR, HEAD_FILE, META_FILE

EXPORT_FORMAT = 1  # bump when the exported graph changes: old cache folders are then not reused
FILES = {"fp32": "model_fp32.onnx", "int8": "model_int8.onnx"}
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class OnnxRuntimeMissing(ImportError):
    """onnxruntime / onnx / onnxscript are not installed (the `local` extra)."""


def _require(export: bool = False) -> Any:
    """onnxruntime (scoring), with onnx and onnxscript when `export` (torch.onnx.export's exporter; slow imports a
    scorer whose export is cached does without); OnnxRuntimeMissing saying how to install them."""
    try:
        import onnxruntime  # heavy: onnxruntime

        if export:
            import onnx  # noqa: F401
            import onnxscript  # noqa: F401
    except ImportError as exc:
        raise OnnxRuntimeMissing(f"prm.runtime=onnx needs onnxruntime, onnx and onnxscript ({exc}): "
                                 f"`pip install -e '.[local]'`, or set prm.runtime=torch") from None
    return onnxruntime


def checkpoint_key(path: str | os.PathLike[str]) -> str:
    """A digest of the checkpoint's files (encoder folder, head, prm.json), the export format and versions."""
    import torch  # heavy: torch

    ort = _require()
    p = Path(path)
    h = hashlib.sha256(f"format={EXPORT_FORMAT} torch={torch.__version__} ort={ort.__version__}".encode())
    files = sorted(f for f in (p / ENCODER_DIR).rglob("*") if f.is_file()) + [p / HEAD_FILE, p / META_FILE]
    for f in files:
        h.update(str(f.relative_to(p)).encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:20]


def export_dir(path: str | os.PathLike[str]) -> Path:
    """Where the ONNX files of this checkpoint live: cache_dir()/prm_onnx/<checkpoint_key>."""
    return cache_dir() / "prm_onnx" / checkpoint_key(path)


def exported(path: str | os.PathLike[str]) -> Path:
    """The folder holding this checkpoint's ONNX files, exporting and quantizing them on first use.

    Concurrent callers (PRM actors starting together) wait on a file lock; a folder appears whole or not at all.
    """
    return build_once(export_dir(path), lambda out: all((out / f).is_file() for f in FILES.values()),
                      lambda tmp: _export(Path(path), tmp))


def _export(path: Path, out: Path) -> None:
    import torch  # heavy: torch
    from onnxruntime.quantization import QuantType, quantize_dynamic  # heavy: onnxruntime

    from pcr_ray.prm.model import encode_pairs, load_checkpoint  # heavy: torch

    _require(export=True)
    model, tok, meta = load_checkpoint(path, device="cpu")
    names = [n for n in INPUTS if n != "token_type_ids" or model.uses_token_types]

    class WithTypes(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            return self.m(input_ids, attention_mask, token_type_ids)

    class WithoutTypes(WithTypes):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            return self.m(input_ids, attention_mask)

    enc = encode_pairs(tok, ["a context of a few words", "another, longer context of a few more words"],
                       ["a step", "a second step"], meta.max_length)
    args = tuple(enc[n] for n in names)
    batch, seq = torch.export.Dim("batch", min=1), torch.export.Dim("seq", min=1)
    fp32 = out / FILES["fp32"]
    with torch.inference_mode(False), torch.no_grad():
        wrapped = (WithTypes() if model.uses_token_types else WithoutTypes()).eval()
        torch.onnx.export(wrapped, args, str(fp32), input_names=names, output_names=["logits"],
                          dynamic_shapes={n: {0: batch, 1: seq} for n in names}, dynamo=True,
                          external_data=False, verbose=False)
    quantize_dynamic(str(fp32), str(out / FILES["int8"]), per_channel=True, weight_type=QuantType.QInt8)
    (out / "export.json").write_text(json.dumps({"checkpoint": str(path.resolve()), "inputs": names,
                                                 "format": EXPORT_FORMAT, "files": FILES}, indent=2))


class OnnxPRM:
    """An ONNX Runtime CPU session on an exported PRM: logits(tokenizer output) -> one logit per row."""

    def __init__(self, model_file: str | os.PathLike[str], threads: int | None = None) -> None:
        ort = _require()
        so = ort.SessionOptions()
        so.intra_op_num_threads = int(threads or 0)  # 0: ORT's own choice (one per core)
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")  # a busy machine: no spin-waiting
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.file = Path(model_file)
        self.session = ort.InferenceSession(str(self.file), so, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.threads = so.intra_op_num_threads

    def logits(self, enc: Mapping[str, Any]) -> list[float]:
        """One logit per row of the tokenizer's (padded, torch or numpy) tensors."""
        feeds = {n: _int64(enc[n]) for n in self.inputs}
        (out,) = self.session.run(["logits"], feeds)
        return [float(v) for v in out.reshape(-1)]


def _int64(x: Any) -> Any:
    arr = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
    return arr.astype(np.int64, copy=False)


def load_onnx(path: str | os.PathLike[str], *, int8: bool, threads: int | None = None) -> OnnxPRM:
    """An OnnxPRM on the checkpoint folder `path` (exported on first use); threads None: torch's thread count."""
    if threads is None:
        import torch  # heavy: torch

        threads = torch.get_num_threads()  # what the actor was given (Ray sets OMP threads = its CPUs)
    return OnnxPRM(exported(path) / FILES["int8" if int8 else "fp32"], threads=threads)
