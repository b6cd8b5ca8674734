"""generator=openai against real servers: llama.cpp's OpenAI-compatible server with SmolLM2 (started here, on
127.0.0.1 and a free port, stopped by PID) for outputs, searches and truncation; a small HTTP server of the test's own
for the failures a model server can return (a 500, no answer)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import jsonschema
import pytest

from pcr_ray.core.trace import Given
from pcr_ray.generators.base import ProposalRequest, build_generator
from pcr_ray.generators.llm_common import build_call
from pcr_ray.generators.openai_server import OpenAIServerGenerator, ServerError
from tests.http_util import JSONHandler, free_port, serve, wait_for_models

CAR = "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"
CAR_GIVENS = (Given("v0", 0, "m/s", "from rest"), Given("a", 2, "m/s^2", "acceleration"), Given("t", 5, "s", "time"))


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server over SmolLM2-135M (the llamacpp backend's GGUF); its /v1 URL."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("sse_starlette", reason="llama.cpp's server needs its extra: pip install 'pcr_ray[dev]'")
    pytest.importorskip("openai")
    from pcr_ray.generators.model_folder import smollm2_gguf

    port = free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    log_fh = log.open("wb")  # its model-loading output is large: a pipe nobody reads would block it
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()),
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1",
                             "--model_alias", "smollm2"],
                            stdout=log_fh, stderr=subprocess.STDOUT, env={"OMP_WAIT_POLICY": "PASSIVE", **_env()})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for_models(url, proc, log, 120, "llama.cpp's server")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log_fh.close()


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}


def server_generator(url: str, **kw) -> OpenAIServerGenerator:
    return build_generator({"kind": "openai", "base_url": url, "structured": "json_object", "max_ops": 6,
                            "max_tokens": 96, "max_tokens_free": 160, "temperature": 0.8, **kw})


@pytest.mark.llm
def test_step_outputs_are_schema_valid_json_with_tokens_from_usage(llama_server) -> None:
    gen = server_generator(llama_server)
    reqs = [ProposalRequest("car", CAR, CAR_GIVENS, k=2, target_unit="m"),
            ProposalRequest("kettle", "A 2000 W kettle runs for 3 minutes. How much energy does it use in J?",
                            (Given("P", 2000, "W"), Given("t", 3, "minute")), k=1, target_unit="J", seed=1)]
    outs, usage = gen.propose_counted(reqs)
    assert [len(o) for o in outs] == [2, 1]
    assert gen.model == "smollm2"  # the server's first listed model, asked once
    for req, cands in zip(reqs, outs, strict=True):
        schema = build_call(req, max_ops=6).schema
        for c in cands:
            jsonschema.validate(json.loads(c), schema)  # the server's grammar from our schema
    # usage from the server: the k=2 request is two HTTP requests, each counting the same prompt
    assert usage[0][0] > 0 and usage[0][0] % 2 == 0 and usage[1][0] > 0 and usage[0][1] > 0 and usage[1][1] > 0
    assert gen.stats.extra["http_requests"] == 3 and gen.stats.extra["prompt_tokens"] == usage[0][0] + usage[1][0]


@pytest.mark.llm
def test_a_truncated_or_malformed_completion_is_a_rejected_candidate(llama_server) -> None:
    from pcr_ray.search import SearchConfig, SearchProblem, run_search

    gen = server_generator(llama_server, structured="none", max_tokens=3)
    outs = gen.propose([ProposalRequest("car", CAR, CAR_GIVENS, k=2, target_unit="m")])
    assert gen.stats.extra["truncated"] == 2 and all(o for o in outs[0])
    # the completions endpoint (a model without a chat template): plain text in, the cut text and tokens back
    plain = server_generator(llama_server, api="completions", structured="none", max_tokens=3)
    texts, usage = plain.propose_counted([ProposalRequest("car", CAR, CAR_GIVENS, k=1, target_unit="m")])
    assert len(texts[0]) == 1 and texts[0][0] and usage[0][0] > 0 and 0 < usage[0][1] <= 3
    assert plain.stats.extra["truncated"] == 1
    problem = SearchProblem("car", CAR, CAR_GIVENS, target_unit="m")
    res = run_search([problem], gen, None, SearchConfig(method="verifier_only", max_steps=2, k=2, max_retries=0))[0]
    assert res.answer_value is None and res.n_proposed >= 2 and res.n_parsed == 0 and not res.error
    # rejected as malformed with a diagnostic (identical cut outputs counted once), nothing raised
    assert set(res.reject_codes) == {"malformed"} and res.reject_codes["malformed"] >= 1


@pytest.mark.llm
@pytest.mark.slow
def test_nsprm_and_direct_through_the_server(llama_server) -> None:
    from pcr_ray.baselines import run_baseline
    from pcr_ray.search import SearchConfig, SearchProblem, run_search
    from tests.prm_helpers import small_prm_scorer

    gen = server_generator(llama_server, max_ops=8, max_tokens=64, max_tokens_free=48)
    problems = [SearchProblem("car", CAR, CAR_GIVENS, target_unit="m")]
    res = run_search(problems, gen, small_prm_scorer(max_batch=16),
                     SearchConfig(method="nsprm", beam_width=2, k=2, max_steps=2, max_retries=0))[0]
    assert res.id == "car" and not res.error and res.iterations >= 1
    assert 0 < res.n_parsed <= res.n_proposed and res.n_verified <= res.n_parsed  # constrained steps were verified
    assert res.n_scored == res.n_verified  # the PRM ranked every valid step, nothing else
    if res.answer_value is not None:  # whatever it answers is a verified trace
        assert res.trace_ok and all(s["verdict"] == "ok" for s in res.steps)
    direct = run_baseline("direct", problems, gen)
    assert [r.id for r in direct] == ["car"] and direct[0].n_proposed == 1 and not direct[0].error
    assert gen.stats.extra["output_tokens"] > 0 and gen.stats.calls >= 2


class FailingServer(JSONHandler):
    """What an overloaded or stuck model server does: GET /models lists one model; POSTs return 500 or hang."""

    hits: list[str] = []
    mode = "500"

    def do_GET(self) -> None:
        self.reply(200, {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "test"}]})

    def do_POST(self) -> None:
        self.body()
        FailingServer.hits.append(self.path)
        if FailingServer.mode == "hang":
            time.sleep(2.0)
        self.reply(500, {"error": {"message": "engine overloaded: KV cache full", "type": "server_error"}})


@pytest.fixture
def failing_server() -> Iterator[str]:
    FailingServer.hits, FailingServer.mode = [], "500"
    with serve(FailingServer) as url:
        yield url


def test_a_server_error_is_retried_then_raised_with_the_servers_message(failing_server) -> None:
    pytest.importorskip("openai")
    gen = build_generator({"kind": "openai", "base_url": failing_server, "max_retries": 1, "timeout_s": 5})
    with pytest.raises(ServerError, match=r"HTTP 500 after 1 retries: engine overloaded: KV cache full"):
        gen.propose([ProposalRequest("car", CAR, CAR_GIVENS, k=1)])
    assert FailingServer.hits == ["/v1/chat/completions"] * 2  # the first try and one retry
    FailingServer.mode = "hang"
    gen = build_generator({"kind": "openai", "base_url": failing_server, "max_retries": 0, "timeout_s": 0.5})
    with pytest.raises(ServerError, match=r"no answer within timeout_s=0.5 s"):
        gen.propose([ProposalRequest("car", CAR, CAR_GIVENS, k=1)])


def test_a_failing_server_makes_error_rows_and_the_batch_goes_on(failing_server) -> None:
    """In the search worker's batch code: the direct baseline's rows through the failing server become error rows
    naming its message; verifier_only's rows over the enumerator in the same batch are answered."""
    pytest.importorskip("openai")
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.pipeline.search_batch import BatchRunner, parse_methods, work_items

    specs = parse_methods(["verifier_only", "direct@srv"])
    rows = work_items(generate_problems(2, seed=0, split="heldout"), specs)
    spec = {"methods": specs, "search": {"beam_width": 2, "max_steps": 4}, "grading": "default", "baselines": {},
            "problem_attempts": 2}
    generators = {"default": build_generator({"kind": "enumerate", "cap": 24}),
                  "srv": build_generator({"kind": "openai", "base_url": failing_server, "max_retries": 0})}
    out = BatchRunner({**spec, "fused_givens": "extract"}, generators, {}).run(rows)
    by_method = {m: [r for r in out if r["method"] == m] for m in ("verifier_only", "direct@srv")}
    assert len(by_method["verifier_only"]) == 2 and not any(r.get("error") for r in by_method["verifier_only"])
    assert len(by_method["direct@srv"]) == 2
    assert all("HTTP 500" in r["error"] and "engine overloaded" in r["error"] for r in by_method["direct@srv"])


def test_config_errors_and_the_key_stay_out_of_the_identity(monkeypatch) -> None:
    with pytest.raises(ValueError, match="structured must be one of"):
        build_generator({"kind": "openai", "structured": "xml"})
    with pytest.raises(ValueError, match=r"unknown openai generator option\(s\) \['modle'\]"):
        build_generator({"kind": "openai", "modle": "x"})
    monkeypatch.setenv("MY_KEY", "sk-secret-123")
    gen = build_generator({"kind": "openai", "api_key_env": "MY_KEY", "model": "m"})
    assert "sk-secret" not in json.dumps(gen.identity)
    pytest.importorskip("openai")
    assert gen.client.api_key == "sk-secret-123"
