"""The scoring service's FastAPI app, Ray-free: verify a trace, PRM-score its steps through a `ScoreBackend`.

`create_app(backend, settings)` builds it; tests run it over ASGI with a local backend, and
`pcr_ray.serve.deploy` puts it behind Ray Serve with the PRM as a batched deployment.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from omegaconf import DictConfig
from starlette.exceptions import HTTPException as StarletteHTTPException

from pcr_ray import __version__, configs
from pcr_ray.core.render import render_candidate, render_context, step_with_value
from pcr_ray.core.trace import parse_trace
from pcr_ray.core.verifier import CODES, VerifierState, check_step, make_diagnostic, verify, verify_step
from pcr_ray.prm.build import QUICK, SERVED_FAMILY
from pcr_ray.prm.checkpoints import default_checkpoint_dir, find_checkpoint
from pcr_ray.prm.runtimes import check_runtime
from pcr_ray.serve.auth import ApiKeyAuth, ApiKeyMiddleware
from pcr_ray.serve.models import (
    MAX_CANDIDATES,
    MAX_ID_CHARS,
    MAX_PROBLEM_CHARS,
    ErrorResponse,
    HealthResponse,
    InfoResponse,
    ScoreRequest,
    ScoreResponse,
    TraceScoreRequest,
    VerdictModel,
    VerifyRequest,
)

SERVICE = "pcr_ray scoring service"
VERSION = __version__


# ---------------------------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class ServeSettings(configs.frozen_view(configs.ServeConfig, "ServeFields", drop=("prm", "ray"),
                                        first=(("ray_address", "Optional[str]"),), defaults=False)):
    """The service's settings: the checked `serve` config (conf/serve.yaml) with its `prm` group folded in and
    `ray.address` as `ray_address`. The fields, their types and meanings are configs.ServeConfig's; the config
    states every default: build these with `from_config` (a composed config) or `from_mapping` (some keys, on top
    of the config's)."""

    @classmethod
    def from_config(cls, cfg: DictConfig | Mapping[str, Any]) -> ServeSettings:
        """Settings from a whole composed `serve` config, checked by configs.check (ConfigError names a bad key)."""
        d = configs.checked_dict("serve", cfg)
        d.pop("prm")  # the `prm` group: its values reach the top-level keys by interpolation
        d["ray_address"] = d.pop("ray")["address"]
        s = cls(**d)
        if s.max_batch_size < 1 or s.replicas < 1 or s.max_body_bytes < 1024:
            raise ValueError("max_batch_size and replicas must be >= 1, max_body_bytes >= 1024")
        if s.max_replicas is not None and s.max_replicas < s.replicas:
            raise ValueError(f"max_replicas={s.max_replicas} is below replicas={s.replicas}: the autoscaler keeps "
                             f"between replicas and max_replicas PRM replicas (null: a fixed `replicas`)")
        if s.int8 and s.bf16:
            raise ValueError("int8 and bf16 are two ways to score faster; set one of them (prm.int8 or prm.bf16)")
        if s.device.startswith("cuda") and s.prm_num_gpus <= 0:
            raise ValueError(f"prm.device={s.device} scores on a GPU, so each PRM replica must reserve one: set "
                             f"prm_num_gpus=1 (or a share such as 0.5), else Ray may place it on a node without one")
        check_runtime(s.runtime, device=s.device, int8=s.int8, bf16=s.bf16)
        return s

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None = None) -> ServeSettings:
        """Settings from some keys (`serve deploy` args, a dict in Python, a whole config as a dict) on top of
        conf/serve.yaml's; an unknown key or a value of the wrong type is a ConfigError naming it."""
        d = dict(values or {})
        if "ray_address" in d:
            ray_cfg = dict(d.get("ray") or {})
            ray_cfg["address"] = d.pop("ray_address")
            d["ray"] = ray_cfg
        return cls.from_config(configs.compose("serve", values=d))


def auth_for(settings: ServeSettings) -> ApiKeyAuth:
    """The API-key policy of these settings; ValueError when the host is beyond loopback and no key is set."""
    return ApiKeyAuth.from_settings(settings.host, settings.api_key_env, settings.api_key_file,
                                    settings.allow_unauthenticated)


def no_checkpoint_message(kind: str = "csp") -> str:
    """How to provide a PRM checkpoint (the 503 message of /v1/score)."""
    where = f" (it is saved to {default_checkpoint_dir(kind)} and found there)"
    return (f"no PRM checkpoint is loaded, so steps cannot be scored; /v1/verify works without one. Train "
            f"one with `pcr-ray train-prm`{where}, or start the service with "
            f"`pcr-ray serve checkpoint=/path/to/ckpt`.")


def resolve_checkpoint(settings: ServeSettings) -> Path | str | None:
    """The checkpoint folder to serve, or None (no PRM); a configured path that is missing is an error.

    `quick` (or null) serves the cached quick PRM of `kind` when one has been trained; the service never trains.
    A causal-LM PRM's checkpoint is its model, as named (a hub name, a folder or a URI).
    """
    if not settings.prm_enabled:
        return None
    if settings.family == SERVED_FAMILY:
        raise ValueError("prm=openai_reward is a PRM another server already serves: score through that server, "
                         "or serve a PRM this service loads (prm=minilm, prm=qwen_math_prm_7b)")
    if settings.family == "causal_lm":
        if not settings.checkpoint or settings.checkpoint == QUICK:
            raise ValueError("a causal_lm PRM is served by name: checkpoint=MODEL (a hub name or a folder)")
        return settings.checkpoint
    if settings.checkpoint and settings.checkpoint != QUICK:
        p = Path(settings.checkpoint).expanduser().resolve()
        if not p.is_dir():
            raise FileNotFoundError(f"PRM checkpoint folder {p} does not exist "
                                    f"(checkpoint={settings.checkpoint!r})")
        return p
    return find_checkpoint(settings.kind)


# ---------------------------------------------------------------------------------------------- scoring core

class ScoreBackend(Protocol):
    """Where (context, step) pairs get their PRM scores: a Serve handle, or a scorer in this process."""

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]: ...

    async def info(self) -> dict[str, Any]: ...


class LocalBackend:
    """A StepScorer (e.g. PRMScorer) called in a worker thread, one call at a time."""

    def __init__(self, scorer: Any, identity: Mapping[str, Any] | None = None) -> None:
        self._scorer = scorer
        self._identity = dict(identity if identity is not None else getattr(scorer, "identity", {}) or {})
        self._lock = asyncio.Lock()

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        async with self._lock:
            return list(await asyncio.to_thread(self._scorer.score, pairs))

    async def info(self) -> dict[str, Any]:
        return dict(self._identity)


class ScoringUnavailable(Exception):
    """The PRM cannot answer (no checkpoint, or its deployment failed)."""


def _finite(x: Any) -> Any:
    """Non-finite floats -> None, recursively (JSON has no inf/nan)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def verdict_json(trace: Any) -> dict[str, Any]:
    """`verify(trace).to_dict()`, JSON-safe (identical for every finite verdict)."""
    return _finite(verify(trace).to_dict())


@dataclass
class _Plan:
    mode: str
    ok: bool
    verdict: dict[str, Any]
    rows: list[dict[str, Any]]
    row_pair: list[int | None]
    pairs: list[tuple[str, str]]


def _add_pair(plan_pairs: list[tuple[str, str]], index: dict[tuple[str, str], int],
              pair: tuple[str, str]) -> int:
    i = index.get(pair)
    if i is None:
        i = index[pair] = len(plan_pairs)
        plan_pairs.append(pair)
    return i


def _accepted_row(i: int, r: Any, rendered: str) -> dict[str, Any]:
    d = r.to_dict()
    return {"index": i, "status": "accepted", "op": d["op"], "name": d["name"], "value": d["value"],
            "unit": d["unit"], "dimension": d["dimension"], "rendered": rendered, "score": None,
            "diagnostic": None}


def _other_row(i: int, raw: Any, diag: Any | None) -> dict[str, Any]:
    op = raw.get("op") if isinstance(raw, dict) and isinstance(raw.get("op"), str) else None
    out = raw.get("out") if isinstance(raw, dict) else None
    name = out.get("name") if isinstance(out, dict) and isinstance(out.get("name"), str) else None
    return {"index": i, "status": "rejected" if diag is not None else "skipped", "op": op, "name": name,
            "value": None, "unit": None, "dimension": None, "rendered": None, "score": None,
            "diagnostic": diag.to_dict() if diag is not None else None}


def _valued(result: Any) -> Any:
    """An accepted step carrying the verifier's recomputed value: how CSP training pairs render steps."""
    return step_with_value(result.step, result.value if math.isfinite(result.value) else None)


def _render_candidate(givens: Any, prefix: Any, step: Any) -> str:
    return render_candidate(givens, prefix, step)


def plan_trace(problem: str, trace: dict[str, Any]) -> _Plan:
    """Trace form: verify the whole trace; every accepted step becomes a (context, step) pair to score."""
    verdict = verify(trace)
    parsed, _ = parse_trace(trace)
    givens = parsed.givens if parsed is not None else ()
    raw_steps = trace.get("steps") if isinstance(trace.get("steps"), list) else []
    accepted = list(verdict.steps)
    by_step = {}
    for d in verdict.diagnostics:
        if d.step is not None:
            by_step.setdefault(d.step, d)
    pairs: list[tuple[str, str]] = []
    index: dict[tuple[str, str], int] = {}
    rows: list[dict[str, Any]] = []
    row_pair: list[int | None] = []
    prefix: list[Any] = []
    for i, raw in enumerate(raw_steps):
        if i < len(accepted):
            r = accepted[i]
            step = _valued(r)
            step_text = _render_candidate(givens, prefix, step)
            row_pair.append(_add_pair(pairs, index, (render_context(problem, givens, prefix), step_text)))
            rows.append(_accepted_row(i, r, step_text))
            prefix.append(step)
        else:
            rows.append(_other_row(i, raw, by_step.get(i)))
            row_pair.append(None)
    return _Plan("trace", verdict.ok, _finite(verdict.to_dict()), rows, row_pair, pairs)


def plan_candidates(problem: str, prefix: dict[str, Any], candidates: Sequence[Any]) -> _Plan:
    """Search form: verify the prefix, then each candidate against it; accepted candidates get scored."""
    body = {k: v for k, v in prefix.items() if k != "answer"}
    parsed, shape_errors = parse_trace(body)
    diags: list[Any] = []
    results: list[Any] = []
    state = None
    if parsed is None:
        diags = [make_diagnostic(e.step, e.code if e.code in CODES else "malformed", f"prefix.{e.path}: {e.message}")
                 for e in shape_errors]
    else:
        state, diags = VerifierState.from_givens(parsed.givens)
        if not diags and len(parsed.steps) > state.config.max_steps:
            diags = [make_diagnostic(None, "malformed", f"more than {state.config.max_steps} steps in the prefix")]
        if not diags:
            for i, step in enumerate(parsed.steps):
                chk = check_step(state, step, i)
                if not chk.ok:
                    diags = [chk.diagnostic]
                    break
                results.append(chk.result)
                state = chk.state
    ok = not diags
    verdict = _finite({"ok": ok, "n_steps": len(results), "steps": [r.to_dict() for r in results],
                       "answer": [], "diagnostics": [d.to_dict() for d in diags]})
    pairs: list[tuple[str, str]] = []
    index: dict[tuple[str, str], int] = {}
    rows: list[dict[str, Any]] = []
    row_pair: list[int | None] = []
    done = [_valued(r) for r in results]
    context = render_context(problem, parsed.givens, done) if ok and parsed else ""
    for j, cand in enumerate(candidates):
        if not ok or state is None:
            rows.append(_other_row(j, cand, None))
            row_pair.append(None)
            continue
        chk = verify_step(state, cand, len(results))
        if chk.ok:
            step_text = _render_candidate(parsed.givens, done, _valued(chk.result))
            row_pair.append(_add_pair(pairs, index, (context, step_text)))
            row = _accepted_row(j, chk.result, step_text)
            row["index"] = j
            rows.append(_finite(row))
        else:
            rows.append(_other_row(j, cand, chk.diagnostic))
            row_pair.append(None)
    return _Plan("candidates", ok, verdict, rows, row_pair, pairs)


def _aggregate(scores: list[float]) -> dict[str, float | None]:
    if not scores:
        return {"min": None, "mean": None, "last": None, "prod": None}
    return {"min": min(scores), "mean": sum(scores) / len(scores), "last": scores[-1],
            "prod": math.prod(scores)}


def finish_plan(plan: _Plan, scores: Sequence[float], req_id: str | None,
                checkpoint: str | None) -> dict[str, Any]:
    """Put the PRM scores into the plan's rows: the /v1/score response body."""
    if len(scores) != len(plan.pairs):
        raise ScoringUnavailable(f"the PRM returned {len(scores)} scores for {len(plan.pairs)} pairs")
    got: list[float] = []
    for row, k in zip(plan.rows, plan.row_pair, strict=True):
        if k is not None:
            s = float(scores[k])
            row["score"] = s if math.isfinite(s) else None
            if row["score"] is not None:
                got.append(s)
    return {"id": req_id, "mode": plan.mode, "ok": plan.ok, "verdict": plan.verdict,
            "steps": _finite(plan.rows), "aggregate": _finite(_aggregate(got)), "n_scored": len(plan.pairs),
            "checkpoint": checkpoint}


# ---------------------------------------------------------------------------------------------- the HTTP app

class BodyLimitMiddleware:
    """Pure ASGI middleware: 413 for a body over `max_bytes` (declared Content-Length, or bytes read)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _send_error(send, 400, f"bad Content-Length header {declared[:40]!r}")
                return
            if int(declared) > self.max_bytes:
                await _send_error(send, 413, _too_big(int(declared), self.max_bytes))
                return
        chunks: list[bytes] = []
        total = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body = msg.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                await _send_error(send, 413, _too_big(total, self.max_bytes, at_least=True))
                return
            chunks.append(body)
            if not msg.get("more_body", False):
                break
        payload = b"".join(chunks)
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": payload, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _too_big(n: int, limit: int, at_least: bool = False) -> str:
    return (f"request body is {'over ' if at_least else ''}{n} bytes, over the limit of {limit} bytes "
            f"(setting max_body_bytes)")


async def _send_error(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail, "errors": []}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class SafeJSONResponse(JSONResponse):
    """JSON that always encodes: ASCII escapes (lone surrogates from the client's JSON survive), no NaN."""

    def render(self, content: Any) -> bytes:
        return json.dumps(_finite(content), ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def _err(status: int, detail: str, errors: list[dict[str, Any]] | None = None) -> JSONResponse:
    return SafeJSONResponse({"detail": detail, "errors": errors or []}, status_code=status)


_UNION_TAGS = ("trace", "candidates")


def _loc(loc: Sequence[Any], union: bool) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    if union and parts and parts[0] in _UNION_TAGS:
        parts = parts[1:]  # drop the union tag of /v1/score (which request form was assumed)
    return ".".join(parts) or "body"


async def _validation_response(request: Request, exc: RequestValidationError) -> JSONResponse:
    errs = list(exc.errors())
    ctype = request.headers.get("content-type", "")
    if any(e.get("type") == "json_invalid" for e in errs):
        e = next(e for e in errs if e.get("type") == "json_invalid")
        why = str((e.get("ctx") or {}).get("error", "")) or "JSON decode error"
        return _err(400, f"request body is not valid JSON: {why}",
                    [{"loc": "body", "msg": f"JSON decode error: {why}", "type": "json_invalid"}])
    body = await request.body()
    if not body.strip():
        return _err(422, "request body is empty: send a JSON object",
                    [{"loc": "body", "msg": "Field required", "type": "missing"}])
    if "json" not in ctype.lower():
        return _err(415, f"send the body as JSON with 'Content-Type: application/json' (got {ctype[:60]!r})")
    union = request.url.path.rstrip("/").endswith("/v1/score")
    out = [{"loc": _loc(e.get("loc", ()), union), "msg": str(e.get("msg", "")),
            "type": str(e.get("type", ""))} for e in errs]
    if union:
        for o in out:
            if o["type"] == "missing" and o["loc"] in ("trace", "prefix", "candidates"):
                o["msg"] += " (send either 'trace', or 'prefix' and 'candidates', with 'problem')"
    detail = "; ".join(f"{o['loc']}: {o['msg']}" for o in out[:8])
    if len(out) > 8:
        detail += f"; ... ({len(out)} errors)"
    return _err(422, f"invalid request: {detail}", out)


_ERR = {"model": ErrorResponse}
_COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {**_ERR, "description": "body is not valid JSON"},
    413: {**_ERR, "description": "body over max_body_bytes"},
    415: {**_ERR, "description": "body is not sent as application/json"},
    422: {**_ERR, "description": "missing fields or wrong types (per-field errors)"},
}


def create_app(backend: ScoreBackend | None, settings: ServeSettings | None = None,
               checkpoint: str | None = None, auth: ApiKeyAuth | None = None) -> FastAPI:
    """The FastAPI app: /v1/verify, /v1/score, /healthz, /v1/info (no Ray needed; Serve hosts it).

    `auth`: the API-key policy; None means `auth_for(settings)` (which refuses a non-loopback host without key).
    """
    settings = settings or ServeSettings.from_mapping({})  # conf/serve.yaml as it is
    auth = auth if auth is not None else auth_for(settings)
    app = FastAPI(
        title=SERVICE, version=VERSION, default_response_class=SafeJSONResponse,
        description="Verify structured reasoning traces symbolically (units, arithmetic, coherence) and "
                    "score their steps with a process reward model. Verifier first: rejected steps get no "
                    "PRM score.",
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(ApiKeyMiddleware, auth=auth)  # outermost: no key, no body read
    state: dict[str, Any] = {"checkpoint": checkpoint}

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return await _validation_response(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _err(exc.status_code, str(exc.detail))

    @app.exception_handler(ScoringUnavailable)
    async def _on_unavailable(request: Request, exc: ScoringUnavailable) -> JSONResponse:
        return _err(503, str(exc))

    @app.get("/healthz", response_model=HealthResponse, summary="liveness")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "prm": backend is not None}

    @app.get("/v1/info", response_model=InfoResponse, summary="service, model and checkpoint identity")
    async def info() -> dict[str, Any]:
        prm: dict[str, Any] = {}
        message = None
        if backend is not None:
            try:
                prm = _finite(await backend.info())
            except Exception as exc:  # the PRM replica is down: say so rather than fail
                message = f"PRM deployment did not answer: {type(exc).__name__}: {exc}"[:500]
        else:
            message = no_checkpoint_message(settings.kind)
        return {"service": SERVICE, "version": VERSION, "prm_available": backend is not None, "prm": prm,
                "message": message, "max_body_bytes": settings.max_body_bytes,
                "limits": {"max_problem_chars": MAX_PROBLEM_CHARS, "max_candidates": MAX_CANDIDATES,
                           "max_id_chars": MAX_ID_CHARS}}

    @app.post("/v1/verify", response_model=VerdictModel, responses=_COMMON_ERRORS,
              summary="verify a trace (same verdict as `pcr-ray verify TRACE json=true`)")
    async def verify_route(req: VerifyRequest) -> JSONResponse:
        return SafeJSONResponse(verdict_json(req.trace))

    @app.post("/v1/score", response_model=ScoreResponse,
              responses={**_COMMON_ERRORS, 503: {**_ERR, "description": "no PRM checkpoint loaded"}},
              summary="verify steps, then PRM-score the accepted ones")
    async def score_route(req: Annotated[ScoreRequest, Body()]) -> JSONResponse:
        if backend is None:
            raise ScoringUnavailable(no_checkpoint_message(settings.kind))
        if isinstance(req, TraceScoreRequest):
            plan = plan_trace(req.problem, req.trace)
        else:
            plan = plan_candidates(req.problem, req.prefix, req.candidates)
        scores: list[float] = []
        if plan.pairs:
            try:
                scores = await backend.score(plan.pairs)
            except ScoringUnavailable:
                raise
            except Exception as exc:
                raise ScoringUnavailable(f"PRM deployment failed: {type(exc).__name__}: {exc}"[:500]) from exc
        if state["checkpoint"] is None:
            try:
                state["checkpoint"] = (await backend.info()).get("checkpoint")
            except Exception:
                state["checkpoint"] = None
        return SafeJSONResponse(finish_plan(plan, scores, req.id, state["checkpoint"]))

    return app
