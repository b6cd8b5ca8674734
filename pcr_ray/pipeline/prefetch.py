"""`pcr-ray prefetch [evaluate overrides]`: every model an evaluation will load, fetched once before it runs.

An evaluation's engines and PRM actors load their models when they start, each on its node: two engines that
start together would download the same hub model side by side, and a URI would be copied once per node cache.
Run on the head (or any machine whose cache the nodes share) with the evaluation's own overrides, this puts every
model the run's methods use where the actors look first: hub names into the Hugging Face cache (`HF_HOME`), URIs
(`s3://`, `gs://`, `file://`) into `<cache>/remote/`, `tiny:` and `sft:` models built, the quick PRM trained.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.configs import checked_dict
from pcr_ray.generators.model_folder import resolve_model
from pcr_ray.paths import is_uri
from pcr_ray.pipeline.search_batch import parse_methods
from pcr_ray.prm.build import QUICK, SERVED_FAMILY, checkpoint_path

# what a hub download skips: other frameworks' and formats' copies of the weights (vLLM and transformers read
# safetensors, or .bin where a model has nothing else)
HUB_IGNORE = ("*.pth", "*.pt", "*.onnx", "*.h5", "*.msgpack", "*.ot", "*.gguf", "original/*", "onnx/*", "openvino/*")
MODEL_KEYS = {"vllm": "model", "hf": "model", "sft": "model", "llamacpp": "model_path"}


@dataclass(frozen=True)
class Fetched:
    """One model of the run: its role (`generator:default`, `prm:baseline`), what the config names, where it is
    now, how it got there (hub, uri, built, local) and the seconds that took."""

    role: str
    source: str
    local: str
    how: str
    seconds: float


def run_models(cfg: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any] | None]]:
    """(role, location, PRM config or None) of every model the run's methods load: the generators with weights
    (their `model`), then the PRMs (their `checkpoint`; a PRM behind a server loads nothing here)."""
    specs = parse_methods(list(cfg["methods"]), cfg.get("method_generators") or {},
                          cfg.get("method_overrides") or {}, cfg.get("method_prms") or {})
    gens = {"default": cfg["generator"], **(cfg.get("generators") or {})}
    prms = {"default": cfg["prm"], **(cfg.get("prms") or {})}
    out: list[tuple[str, str, Mapping[str, Any] | None]] = []
    for key in sorted({s.generator for s in specs}):
        g = gens.get(key)
        if g is None:
            raise ValueError(f"methods use generator {key!r}, not configured in `generators` (have {sorted(gens)})")
        field = MODEL_KEYS.get(str(g.get("kind")))
        if field and g.get(field):
            out.append((f"generator:{key}", str(g[field]), None))
    for key in sorted({s.prm for s in specs if s.uses_prm}):
        p = prms.get(key)
        if p is None:
            raise ValueError(f"methods use PRM {key!r}, not configured in `prms` (have {sorted(prms)})")
        if p.get("family") != SERVED_FAMILY:  # a served PRM is the server's to load
            out.append((f"prm:{key}", str(p.get("checkpoint") or ""), p))
    return out


def hub_download(name: str) -> Path:
    """A hub model's snapshot in the Hugging Face cache (downloaded once; offline: the cached one, if any)."""
    from huggingface_hub import snapshot_download  # heavy: huggingface_hub

    try:
        folder = Path(snapshot_download(name, ignore_patterns=[*HUB_IGNORE, "*.bin"]))
        if not any(folder.glob("*.safetensors")):  # a model without safetensors: its .bin weights
            folder = Path(snapshot_download(name, ignore_patterns=list(HUB_IGNORE)))
    except Exception as exc:  # noqa: BLE001  (offline, unknown repo, gated, no space: one message)
        raise RuntimeError(
            f"cannot fetch {name!r} from the Hugging Face hub ({type(exc).__name__}: {str(exc).splitlines()[0]}). "
            f"Without network here, copy the model folder to storage every node sees and name it instead "
            f"(a path, or a URI such as s3://bucket/models/...)") from None
    return folder


def fetch_model(location: str) -> tuple[Path, str]:
    """Where `location` (a generator's model or a causal-LM PRM) is on this machine once fetched, and how."""
    if location.startswith(("tiny:", "sft:")) or is_uri(location):  # where the actors will look: the same call
        return Path(resolve_model(location)), "uri" if is_uri(location) else "built"
    if Path(location).expanduser().exists():
        return Path(location).expanduser().resolve(), "local"
    if location.startswith(("/", ".", "~")):
        raise FileNotFoundError(f"model folder {location} does not exist on this machine")
    return hub_download(location), "hub"


def prefetch(cfg: Any) -> list[Fetched]:
    """Fetch every model of the evaluation `cfg` (an evaluate config); what each became, in order."""
    cfg = checked_dict("evaluate", cfg)
    done: list[Fetched] = []
    for role, location, prm_cfg in run_models(cfg):
        t0 = time.perf_counter()
        if prm_cfg is not None and prm_cfg.get("family") != "causal_lm":  # a checkpoint trained here
            local = Path(checkpoint_path(prm_cfg))  # the quick PRM trained on first use; a URI copied
            how = "built" if location == QUICK else "uri" if is_uri(location) else "local"
        else:  # a generator's model, or a causal-LM PRM's (a model like any other)
            local, how = fetch_model(location)
        done.append(Fetched(role, location, str(local), how, round(time.perf_counter() - t0, 2)))
        print(f"[prefetch] {role}: {location} -> {local} ({how}, {done[-1].seconds:g}s)", flush=True)
    if not done:
        print("[prefetch] the run's methods load no model (the enumerator and no PRM)", flush=True)
    return done


USAGE = """usage: pcr-ray prefetch [key=value ...]

Fetch every model an evaluation with the same overrides will load, once, before it runs: hub models into the
Hugging Face cache, URIs (s3://, gs://, file://) into <cache>/remote/, tiny: and sft: models built, the quick PRM
trained. On a cluster run it on the head with the cache and HF_HOME on the shared volume (docs/cluster.md).
e.g.  pcr-ray prefetch experiment=paper_table
      pcr-ray prefetch experiment=paper_table generator.model=s3://bucket/models/qwen2.5-math-7b"""

# the evaluate config (same overrides as the run), its Hydra log folder in the cache rather than a run folder
main = hydra_command("prefetch", "evaluate", prefetch, USAGE,
                     preset=("hydra.run.dir=${pcr_ray.cache:}/hydra/prefetch/${now:%Y-%m-%d_%H-%M-%S}",
                             "hydra.output_subdir=null"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
