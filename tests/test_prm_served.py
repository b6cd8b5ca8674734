"""prm=openai_reward's configuration and failures, against a small HTTP server of the test's own that fails as a
model server can (a 500, no answer, an answer that is not one score per step). The served model itself is scored
by a real vLLM server in tests/test_vllm_served_prm.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from pcr_ray.openai_client import ServerError
from pcr_ray.prm.build import build_scorer, checkpoint_path
from tests.http_util import JSONHandler, serve

CTX = "A car starts from rest at 2 m/s^2 for 5 s. How far does it go? | givens: v0=0 m/s; a=2 m/s^2; t=5 s"
STEP = "d = kin_displacement(v0=v0, a=a, t=t) = 25 [m]"


class PoolingServer(JSONHandler):
    """GET /v1/models lists one model; POST /pooling answers as `mode` says."""

    hits: list[str] = []
    bodies: list[dict] = []
    mode = "500"

    def do_GET(self) -> None:
        self.reply(200, {"object": "list", "data": [{"id": "prm", "object": "model", "owned_by": "test"}]})

    def do_POST(self) -> None:
        PoolingServer.bodies.append(json.loads(self.body()))
        PoolingServer.hits.append(self.path)
        if PoolingServer.mode == "hang":
            time.sleep(2.0)
        if PoolingServer.mode == "no_tags":  # a server whose step_tag_id is not the convention's separator
            self.reply(200, {"object": "list", "model": "prm", "data": [{"index": 0, "object": "pooling", "data": []}],
                             "usage": {"prompt_tokens": 9}})
            return
        self.reply(500, {"error": {"message": "engine overloaded: KV cache full", "type": "server_error"}})


@pytest.fixture
def pooling_server() -> Iterator[str]:
    PoolingServer.hits, PoolingServer.bodies, PoolingServer.mode = [], [], "500"
    with serve(PoolingServer) as url:
        yield url


def served_cfg(url: str = "http://127.0.0.1:9/v1", **server: object) -> dict:
    return {"family": "openai_reward", "convention": "qwen_prm", "checkpoint": "", "cache_size": 10,
            "server": {"base_url": url, "max_retries": 1, "timeout_s": 5, **server}}


def test_failures_raise_the_servers_message(pooling_server) -> None:
    """A 500 is retried, then raised with the server's message; a request that sees no step score says which
    server setting is wrong; no answer within timeout_s says so. The request is the convention's chat, task
    token_classify, on /pooling beside the /v1 root."""
    pytest.importorskip("openai")
    prm = build_scorer(served_cfg(pooling_server))
    with pytest.raises(ServerError, match=r"HTTP 500 after 1 retries: engine overloaded: KV cache full"):
        prm.score([(CTX, STEP)])
    assert PoolingServer.hits == ["/pooling"] * 2 and prm.identity["model"] == "prm"
    body = PoolingServer.bodies[0]
    assert body["task"] == "token_classify" and body["add_generation_prompt"] is False and body["model"] == "prm"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant"]
    assert body["messages"][2]["content"] == "Compute d = kin_displacement(v0=v0, a=a, t=t) = 25 m.<extra_0>"
    PoolingServer.mode = "no_tags"
    with pytest.raises(ServerError, match=r"gave 0 step score\(s\) .* for a trace of 1 step\(s\).*step_tag_id"):
        prm.score([(CTX, STEP)])
    PoolingServer.mode = "hang"
    prm = build_scorer(served_cfg(pooling_server, max_retries=0, timeout_s=0.5))
    with pytest.raises(ServerError, match=r"no answer within timeout_s=0.5 s"):
        prm.score([(CTX, STEP)])


def test_a_failing_prm_server_makes_error_rows_and_the_batch_goes_on(pooling_server) -> None:
    """In the search worker's batch code: nsprm's rows through the failing PRM server become error rows naming
    its message; verifier_only's rows in the same batch are answered."""
    pytest.importorskip("openai")
    from pcr_ray.data.physics import generate_problems
    from pcr_ray.generators.base import build_generator
    from pcr_ray.pipeline.search_batch import BatchRunner, parse_methods, work_items

    specs = parse_methods(["verifier_only", "nsprm"])
    rows = work_items(generate_problems(2, seed=0, split="heldout"), specs)
    spec = {"methods": specs, "search": {"beam_width": 2, "max_steps": 4}, "grading": "default", "baselines": {},
            "problem_attempts": 2, "fused_givens": "extract"}
    prm = build_scorer(served_cfg(pooling_server, max_retries=0))
    out = BatchRunner(spec, {"default": build_generator({"kind": "enumerate", "cap": 24})}, {"default": prm}).run(rows)
    by_method = {m: [r for r in out if r["method"] == m] for m in ("verifier_only", "nsprm")}
    assert len(by_method["verifier_only"]) == 2 and not any(r.get("error") for r in by_method["verifier_only"])
    assert len(by_method["nsprm"]) == 2
    assert all("HTTP 500" in r["error"] and "engine overloaded" in r["error"] for r in by_method["nsprm"])


def test_config_is_checked_and_the_key_stays_out(monkeypatch) -> None:
    """The conf group composes and checks; a convention no pooling server scores, an unknown server option and a
    bad concurrency are refused by name; the API key is read from its variable and never in the identity; a
    served PRM is nothing to fetch and nothing `pcr-ray serve` loads."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pcr_ray.configs import check, to_plain
    from pcr_ray.paths import conf_dir
    from pcr_ray.pipeline.prefetch import run_models
    from pcr_ray.serve.app import ServeSettings, resolve_checkpoint

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = to_plain(check("evaluate", compose("evaluate", overrides=[
            "experiment=smoke", "prm=openai_reward", "prm.server.base_url=http://prm.internal:8000/v1"])))
    assert cfg["prm"]["family"] == "openai_reward" and cfg["prm"]["server"]["base_url"].startswith("http://prm.")
    assert checkpoint_path(cfg["prm"]) == "" and not [r for r, *_ in run_models(cfg) if r.startswith("prm:")]
    with pytest.raises(ValueError, match=r"scores the \['qwen_prm'\] convention .*'math_shepherd'"):
        build_scorer({**served_cfg(), "convention": "math_shepherd"})
    with pytest.raises(ValueError, match=r"unknown prm.server option\(s\) \['base_ulr'\]"):
        build_scorer({**served_cfg(), "server": {"base_ulr": "x"}})
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        build_scorer(served_cfg(concurrency=0))
    monkeypatch.setenv("PRM_KEY", "sk-secret-456")
    prm = build_scorer(served_cfg(api_key_env="PRM_KEY"))
    assert "sk-secret" not in json.dumps(prm.identity) and prm.identity["family"] == "openai_reward"
    with pytest.raises(ValueError, match="another server already serves"):
        resolve_checkpoint(ServeSettings.from_mapping({"family": "openai_reward"}))
    pytest.importorskip("openai")
    assert prm.server.client.api_key == "sk-secret-456"
