"""`pcr-ray prefetch` and model URIs: every model a run loads, fetched once into the node's cache before it runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pcr_ray.configs import compose, to_plain
from pcr_ray.generators.model_folder import resolve_model
from pcr_ray.pipeline.prefetch import run_models
from tests.pipeline_util import tiny_checkpoint

HUB_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _prefetch(tmp: Path, *overrides: str) -> subprocess.CompletedProcess:
    """`pcr-ray prefetch` in its own process: the cache and the Hugging Face cache under `tmp`, no network."""
    env = {**os.environ, "PCR_RAY_CACHE": str(tmp / "cache"), "HF_HOME": str(tmp / "hf"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "pcr_ray", "prefetch", *overrides], env=env, capture_output=True,
                          text=True, timeout=300)


def _hub_snapshot(hf_home: Path, repo: str) -> Path:
    """A model in the Hugging Face cache's own layout (refs/main -> snapshots/<commit>/), as a download leaves it."""
    folder = hf_home / "hub" / f"models--{repo.replace('/', '--')}"
    snap = folder / "snapshots" / HUB_COMMIT
    snap.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(HUB_COMMIT)
    (snap / "config.json").write_text("{}")
    (snap / "model.safetensors").write_bytes(b"weights")
    return snap


def test_the_models_of_a_run_are_what_its_methods_load():
    cfg = to_plain(compose("evaluate", ["methods=[verifier_only,nsprm,direct@llm]", "generator=vllm_tiny",
                                        "+generators.llm={kind: openai, base_url: 'http://127.0.0.1:1/v1'}",
                                        "prm.checkpoint=s3://bucket/prm"]))
    assert [(role, where) for role, where, _ in run_models(cfg)] == [("generator:default", "tiny:smollm2"),
                                                                     ("prm:default", "s3://bucket/prm")]
    cfg = to_plain(compose("evaluate", ["methods=[verifier_only]"]))  # the enumerator, no PRM: nothing to fetch
    assert run_models(cfg) == []


def test_uris_are_copied_into_the_cache_once_and_the_actors_load_that_copy(tmp_path, monkeypatch):
    store = tmp_path / "store"
    (store / "model").mkdir(parents=True)
    (store / "model" / "config.json").write_text('{"model_type": "llama"}')
    ckpt = tiny_checkpoint(store / "prm")
    out = _prefetch(tmp_path, "methods=[nsprm]", "generator=vllm_tiny", f"generator.model={(store / 'model').as_uri()}",
                    f"prm.checkpoint={ckpt.as_uri()}")
    assert out.returncode == 0, out.stderr[-2000:]
    remote = tmp_path / "cache" / "remote"
    copies = sorted(c for c in remote.iterdir() if not c.name.startswith("."))  # (the build locks are hidden)
    assert len(copies) == 2 and sorted((c / "config.json").exists() for c in copies) == [False, True]
    assert f"generator:default: {(store / 'model').as_uri()} -> {remote}" in out.stdout and "(uri," in out.stdout
    assert f"prm:default: {ckpt.as_uri()} -> {remote}" in out.stdout
    # the engine actor resolves the same URI to the copy prefetch made, and copies nothing again
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "cache"))
    model_copy = next(c for c in copies if (c / "config.json").exists())
    before = model_copy.stat().st_mtime_ns
    assert resolve_model((store / "model").as_uri()) == str(model_copy)
    assert model_copy.stat().st_mtime_ns == before
    assert sorted(c for c in remote.iterdir() if not c.name.startswith(".")) == copies


def test_hub_models_come_from_the_hugging_face_cache_and_a_missing_one_fails_naming_it(tmp_path):
    snap = _hub_snapshot(tmp_path / "hf", "org/tiny")
    out = _prefetch(tmp_path, "methods=[verifier_only]", "generator=vllm_tiny", "generator.model=org/tiny")
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"generator:default: org/tiny -> {snap} (hub," in out.stdout
    out = _prefetch(tmp_path, "methods=[verifier_only]", "generator=vllm_tiny", "generator.model=org/absent")
    assert out.returncode == 1
    assert "cannot fetch 'org/absent' from the Hugging Face hub" in out.stderr and "URI" in out.stderr


def test_a_missing_local_folder_fails_before_anything_loads(tmp_path):
    model = "/nonexistent/model"
    out = _prefetch(tmp_path, "methods=[verifier_only]", "generator=vllm_tiny", f"generator.model={model}")
    assert out.returncode == 1 and f"model folder {model} does not exist" in out.stderr
