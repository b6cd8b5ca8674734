"""Helpers of the evaluation-pipeline tests: a tiny PRM checkpoint and the smoke configuration."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.parquet as pq


def tiny_checkpoint(path: Path, kind: str = "csp") -> Path:
    """A real PRM checkpoint folder with a 1-layer randomly initialised encoder and the MiniLM tokenizer.

    Its scores carry no knowledge; the pipeline tests need a PRM that loads and scores fast, not a good one. Every
    call writes the same bytes (seeded weights, a fixed `created`), so the ONNX export the PRM actors score with is
    made once per machine (cached by the checkpoint's content, pcr_ray.prm.onnx_runtime.checkpoint_key).
    """
    if (path / "prm.json").exists():
        return path
    from transformers import BertConfig

    from pcr_ray.prm.model import PRMMeta, build_model, minilm_path, save_checkpoint

    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512)
    model, tok = build_model(str(minilm_path()), config=cfg, seed=0)
    return save_checkpoint(model, tok, path, PRMMeta(backbone="tiny-random-bert", kind=kind, max_length=128,
                                                      created=0.0))


def smoke_overrides(run_dir: Path, checkpoint: Path | None, *extra: str) -> list[str]:
    """experiment=smoke, the run directory, the tiny PRM and no progress bar."""
    out = ["experiment=smoke", f"run_dir={run_dir}", "pipeline.progress=false"]
    if checkpoint is not None:
        out.append(f"prm.checkpoint={checkpoint}")
    return out + list(extra)


def read_rows(run_dir: Path) -> list[dict]:
    return pq.read_table(run_dir / "results.parquet").to_pylist()


def read_metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


class MetricsTableParser(HTMLParser):
    """Reads <table id=metrics> rows as lists of (data-col, data-value, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.rows: list[list[tuple[str, str | None, str]]] = []
        self.cell: list | None = None
        self.srcs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("img", "script", "link") and (a.get("src") or a.get("href")):
            self.srcs.append(a.get("src") or a.get("href"))
        if tag == "table":
            self.inside = a.get("id") == "metrics"
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag == "td":
            self.cell = [a.get("data-col"), a.get("data-value"), ""]

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[2] += data

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.rows[-1].append(tuple(self.cell))
            self.cell = None
        elif tag == "table":
            self.inside = False

    def by_method(self) -> dict[str, dict[str, tuple[str | None, str]]]:
        """{method: {column: (data-value, text)}} of the metrics table's body rows."""
        return {r[0][2]: {c: (v, t) for c, v, t in r} for r in self.rows if r}


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars")
