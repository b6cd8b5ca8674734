"""Where the quick PRM lives, and its in-process CPU training (`prm.checkpoint=quick`, see pcr_ray/prm/build.py).

`ensure_checkpoint(kind)` is what `quick` resolves to on the driver: it returns cache_dir()/prm/<kind>_shared-<key>
(the shared-context PRM, pcr_ray.prm.shared; `attention="pair"`: cache_dir()/prm/<kind>-<key>, the standard
cross-encoder) when it holds a checkpoint, else builds pairs from gold traces (procedural
physics problems with a seed disjoint from the evaluation sets, GSM8K train) and trains MiniLM on them within a
small budget (about 3 minutes on 2 cores for the shared-context PRM's listwise recipe, 4.5 for the pair one).

The cache is per user ($XDG_CACHE_HOME/pcr_ray, shared by every checkout and by the tests), so a checkpoint is
trained once per machine. Each one is keyed (the folder's name, and recipe.json) by everything that determines
it: the recipe's settings, the content of the data files it reads and the source of the code that makes its
pairs and trains it (CODE_FILES); a different key trains anew into a folder of its own, and the oldest of one
name beyond KEEP_VERSIONS go. A file lock keeps concurrent callers from training twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pcr_ray.core.render import RENDER_VERSION
from pcr_ray.data.readers import data_files, load_dataset
from pcr_ray.negatives.pairs import KIND_GROUPS, PairConfig, pairs_from_problems
from pcr_ray.paths import PACKAGE_DIR, cache_dir, file_lock
from pcr_ray.prm.base import META_FILE, PRM_KINDS

log = logging.getLogger(__name__)

# problems for the quick training: physics of the training templates (split train; seeds far from the evaluation
# sets' too), GSM8K train
DEFAULT_SOURCES: tuple[dict[str, Any], ...] = (
    {"name": "physics", "kwargs": {"n": 400, "seed": 7919, "split": "train"}},
    {"name": "gsm8k_train", "limit": 300},
)
# the quick PRM's recipe by attention: train pairs and loss. The pair cross-encoder: 900 pairs, pairwise loss, about
# 4.5 minutes on 2 cores. The shared-context PRM: 1,500 pairs under the listwise loss (each prefix's positive
# against all of its negatives, one context encoded once for the whole list), about 3 minutes; its pairwise accuracy
# on unseen templates is that of 3,000 and 6,000 pairs, and falls below 1,500 (docs/prm.md, How many pairs the quick
# PRM needs)
DEFAULT_BUDGET_PAIRS = {"pair": 900, "shared_context": 1500}
DEFAULT_LOSS = {"pair": "pairwise", "shared_context": "listwise"}
RECIPE_FILE = "recipe.json"
KEEP_VERSIONS = 3  # checkpoints of one recipe name kept for other code or data versions (other checkouts)
# the source that determines a quick checkpoint: the gold traces, their verifier and the PRM's rendering (core/, data/),
# the negatives and the enumerator that proposes their alternative steps, and the PRM's model and training loop (not
# how it is scored: scorer, kernels, ONNX, caches)
CODE_FILES = ("core/**/*.py", "data/**/*.py", "negatives/**/*.py", "generators/enumerate.py", "generators/schema.py",
              "prm/base.py", "prm/model.py", "prm/shared.py", "prm/train_loop.py")
_DIGESTS: dict[str, str] = {}


def code_digest() -> str:
    """A digest of the Python source of CODE_FILES (once per process)."""
    if "code" not in _DIGESTS:
        root = PACKAGE_DIR
        h = hashlib.sha256()
        for pattern in CODE_FILES:
            for f in sorted(root.glob(pattern)):
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
        _DIGESTS["code"] = h.hexdigest()
    return _DIGESTS["code"]


def data_digest(sources: Sequence[Mapping[str, Any]]) -> str:
    """A digest of the data files these sources read (their content; generated sources read none)."""
    h = hashlib.sha256()
    for src in sources:
        for f in data_files(str(src["name"]), src.get("data_dir")):
            h.update(f.name.encode() + b"\0")
            with f.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def recipe_of(kind: str, attention: str, *, budget_pairs: int | None = None, epochs: int = 1, val_pairs: int = 200,
              seed: int = 0, backbone: str = "minilm", sources: Sequence[Mapping[str, Any]] | None = None,
              train_overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings that determine a quick checkpoint, defaults filled in (ensure_checkpoint's arguments)."""
    return {"kind": kind, "attention": attention,
            "budget_pairs": DEFAULT_BUDGET_PAIRS[attention] if budget_pairs is None else int(budget_pairs),
            "epochs": int(epochs), "val_pairs": int(val_pairs), "seed": int(seed), "backbone": str(backbone),
            "sources": [dict(s) for s in (DEFAULT_SOURCES if sources is None else sources)],
            "loss": DEFAULT_LOSS[attention], "train_overrides": dict(train_overrides or {})}


def recipe_key(recipe: Mapping[str, Any]) -> str:
    """The key of a recipe: its settings, its data files' content and the training code (20 hex digits)."""
    blob = json.dumps({"recipe": recipe, "render": RENDER_VERSION, "code": code_digest(),
                       "data": data_digest(recipe["sources"])}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def default_checkpoint_dir(kind: str = "csp", attention: str = "shared_context",
                           recipe: Mapping[str, Any] | None = None) -> Path:
    """cache_dir()/prm/<kind>-<key> (pair attention) or cache_dir()/prm/<kind>_shared-<key> (shared_context), the
    key (recipe_key, 12 digits) of `recipe` (default: the quick recipe of kind and attention) on this machine's data
    and code: each recipe, data and code version has a folder of its own."""
    from pcr_ray.prm.shared import check_attention  # torch: imported only when a checkpoint folder is named

    _check_kind(kind)
    check_attention(attention)
    recipe = recipe_of(kind, attention) if recipe is None else recipe
    name = kind if attention == "pair" else f"{kind}_shared"
    return cache_dir() / "prm" / f"{name}-{recipe_key(recipe)[:12]}"


def prune_old(dest: Path, keep: int = KEEP_VERSIONS) -> None:
    """Remove all but the `keep` newest checkpoints of dest's name (other keys: older code or data)."""
    base = dest.name.rsplit("-", 1)[0]
    olds = sorted((p for p in dest.parent.glob(f"{base}-*") if p.is_dir() and p != dest and
                   p.name.rsplit("-", 1)[0] == base), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in olds[max(0, keep - 1):]:
        shutil.rmtree(p, ignore_errors=True)
    if (dest.parent / base / META_FILE).exists():  # a folder of the name without a key: made before keys
        shutil.rmtree(dest.parent / base, ignore_errors=True)


def find_checkpoint(kind: str = "csp", attention: str = "shared_context",
                    recipe: Mapping[str, Any] | None = None) -> Path | None:
    """The cached checkpoint of this recipe (default: the quick one of `kind` and `attention`), or None when there
    is none or it was made by another recipe, data or code (its recipe.json: `ensure_checkpoint` trains anew)."""
    recipe = recipe_of(kind, attention) if recipe is None else recipe
    p = default_checkpoint_dir(kind, attention, recipe)
    try:
        stored = json.loads((p / RECIPE_FILE).read_text())
        return p if (p / META_FILE).exists() and stored.get("key") == recipe_key(recipe) else None
    except (OSError, ValueError):  # no recipe.json, or an unreadable one: train a new checkpoint
        return None


def install_checkpoint(src: Path, dest: Path) -> Path:
    """Copy the checkpoint folder `src` to `dest`, replacing what is there without a moment of a half folder."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    old = dest.parent / f".{dest.name}.old-{os.getpid()}"
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest


def _check_kind(kind: str) -> None:
    if kind not in PRM_KINDS:
        raise ValueError(f"PRM kind must be one of {PRM_KINDS}, got {kind!r}")


def load_problems(sources: Sequence[Mapping[str, Any]],
                  used: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Problem rows (Problem.to_dict()) with gold traces from named data sets; sources that are absent are skipped,
    with a warning. `used`, when given, receives each source's count of problems used, or why it was skipped."""
    rows: list[dict[str, Any]] = []
    for src in sources:
        try:
            probs = load_dataset(str(src["name"]), src.get("data_dir"), limit=src.get("limit"),
                                 **dict(src.get("kwargs") or {}))
        except (ImportError, FileNotFoundError) as exc:
            log.warning("[prm] skipping source %s (this PRM trains without it): %s", src["name"], exc)
            if used is not None:
                used[str(src["name"])] = f"absent: {exc}"
            continue
        got = [p.to_dict() for p in probs if p.gold_trace]
        if used is not None:
            used[str(src["name"])] = len(got)
        rows.extend(got)
    return rows


def trained_on(checkpoint: str | Path) -> dict[str, Any] | None:
    """What a quick checkpoint was trained on (its recipe.json): problems per source (or why a source was absent)
    and the pair counts; None for a checkpoint not made by ensure_checkpoint."""
    try:
        stored = json.loads((Path(checkpoint) / RECIPE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return stored.get("trained_on")


def _rank(row: Mapping[str, Any], seed: int) -> str:
    key = f"{seed}|{row['problem_id']}|{row['t']}|{row['kind']}|{row['neg_step']}"
    return hashlib.sha1(key.encode()).hexdigest()


def select_pairs(rows: Sequence[Mapping[str, Any]], n: int, seed: int = 0) -> list[Mapping[str, Any]]:
    """A deterministic, order-independent subset of n rows (hash ranking), returned in ranked order."""
    ranked = sorted(rows, key=lambda r: _rank(r, seed))
    return ranked[:n] if n > 0 else ranked


def ensure_checkpoint(kind: str = "csp", *, budget_pairs: int | None = None, epochs: int = 1, val_pairs: int = 200,
                      seed: int = 0, backbone: str = "minilm",
                      sources: Sequence[Mapping[str, Any]] | None = None, force: bool = False,
                      train_overrides: Mapping[str, Any] | None = None, attention: str = "shared_context") -> Path:
    """The cached checkpoint of `kind`; when missing (or force), train one quickly on CPU and cache it.

    budget_pairs train pairs (drawn from CSP pairs for 'csp', random perturbations for 'random'; default
    DEFAULT_BUDGET_PAIRS[attention]) for `epochs` epochs under DEFAULT_LOSS[attention] (train_overrides may set
    another); defaults take about 4.5 (pair) and 3 (shared_context) minutes on 2 cores. The schedule
    is a fixed number of pairs, so the same data and seed train the same steps on any machine (up to
    floating-point differences between CPUs).
    `attention` is "shared_context" (the default, pcr_ray.prm.shared) or "pair" (the standard cross-encoder, cached
    apart in cache_dir()/prm/<kind>-<key>).
    """
    from pcr_ray.prm.train_loop import TrainConfig, train_local  # torch: imported only when a PRM is trained

    _check_kind(kind)
    recipe = recipe_of(kind, attention, budget_pairs=budget_pairs, epochs=epochs, val_pairs=val_pairs, seed=seed,
                       backbone=backbone, sources=sources, train_overrides=train_overrides)
    dest = default_checkpoint_dir(kind, attention, recipe)
    if not force and find_checkpoint(kind, attention, recipe):
        return dest
    with file_lock(dest.parent / f".{dest.name}.lock"):
        if not force and find_checkpoint(kind, attention, recipe):
            return dest  # another process trained it while we waited
        t0 = time.perf_counter()
        used: dict[str, Any] = {}
        problems = load_problems(recipe["sources"], used)
        if not problems:
            raise RuntimeError("no problems with gold traces to make PRM training pairs from "
                               "(physics generator or GSM8K data needed)")
        rows = pairs_from_problems(problems, PairConfig(kinds=KIND_GROUPS[kind], seed=seed),
                                   processes=os.cpu_count() or 1)
        train = select_pairs([r for r in rows if r["split"] == "train"], recipe["budget_pairs"], seed)
        val = select_pairs([r for r in rows if r["split"] == "validation"], val_pairs, seed)
        if not train:
            raise RuntimeError(f"no {kind} training pairs from {len(problems)} problems")
        log.info("[prm] training a %s PRM: %d train / %d val pairs from %d problems (%.1fs to make pairs) into %s",
                 kind, len(train), len(val), len(problems), time.perf_counter() - t0, dest)
        # every core, whatever OMP_NUM_THREADS says: the caller may be a one-thread process (the vLLM tests)
        cfg = TrainConfig.from_dict({"backbone": backbone, "kind": kind, "epochs": epochs, "seed": seed,
                                     "n_train": len(train), "attention": attention, "torch_threads": os.cpu_count(),
                                     "loss": DEFAULT_LOSS[attention], **dict(train_overrides or {})})
        run_dir = dest.parent / f".run_{dest.name}_{os.getpid()}"
        shutil.rmtree(run_dir, ignore_errors=True)
        try:
            metrics, final = train_local(train, val, run_dir, cfg)
            on = {"problems": used, "train_pairs": len(train), "val_pairs": len(val)}
            (Path(final) / RECIPE_FILE).write_text(json.dumps({"key": recipe_key(recipe), "recipe": recipe,
                                                               "trained_on": on}, indent=2, default=str))
            install_checkpoint(Path(final), dest)
            prune_old(dest)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        acc = metrics.get("val_pairwise_acc", float("nan"))
        log.info("[prm] %s PRM ready at %s (val pairwise acc %.3f, %.0fs)", kind, dest, acc, time.perf_counter() - t0)
        return dest
