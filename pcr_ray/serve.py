"""Ray Serve scoring endpoint: verify a trace, PRM-score its steps with dynamic batching (`pcr-ray serve`).

Two deployments: `ScoringIngress` (FastAPI; runs the symbolic verifier on its own CPU) and
`PRMScorerDeployment` (the PRM, `@serve.batch` dynamic batching across requests). The FastAPI app is built by
`create_app`, which also runs without Ray (tests fuzz it over ASGI); `build_app` is the `serve deploy` import
path. HTTP requests to the Serve proxy need no Ray auth token (token auth guards Ray's own APIs and the
dashboard, which `serve deploy` talks to).
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Annotated, Any, Protocol

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError
from ray import serve
from starlette.exceptions import HTTPException as StarletteHTTPException

from pcr_ray import __version__
from pcr_ray.serve_models import (
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
from pcr_ray.trace import parse_trace
from pcr_ray.verifier import CODES, VerifierState, _diag, check_step, verify, verify_step

SERVICE = "pcr_ray scoring service"
VERSION = __version__


# ---------------------------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class ServeSettings:
    """Service settings (conf/serve.yaml); `checkpoint=None` means `find_checkpoint(kind)`."""

    checkpoint: str | None = None
    kind: str = "csp"
    prm_enabled: bool = True
    replicas: int = 1
    max_batch_size: int = 32
    batch_wait_timeout_s: float = 0.01
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 1_048_576
    app_name: str = "pcr_ray"
    route_prefix: str = "/"
    int8: bool = False
    bf16: bool = False  # score batched under bfloat16 autocast (not with int8)
    device: str = "cpu"
    scorer_max_batch: int = 64
    scorer_max_length: int | None = None  # None: the length the checkpoint was trained at
    prm_num_cpus: float = 1.0
    ingress_num_cpus: float = 0.5
    max_ongoing_requests: int = 256
    torch_threads: int = 0
    ray_address: str | None = None

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any] | None) -> ServeSettings:
        """Settings from a config dict (Hydra's or `serve deploy` args); unknown keys are an error."""
        d = dict(cfg or {})
        if isinstance(d.get("prm"), Mapping):
            d.pop("prm")  # the Hydra `prm` group: its values reach the top-level keys by interpolation
        ray_cfg = d.pop("ray", None)
        if isinstance(ray_cfg, Mapping) and ray_cfg.get("address") and not d.get("ray_address"):
            d["ray_address"] = str(ray_cfg["address"])
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown serve setting(s) {unknown}; known: {sorted(known)}")
        try:
            s = TypeAdapter(cls).validate_python(d)
        except ValidationError as exc:
            bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"bad serve setting(s): {bad}") from None
        if s.max_batch_size < 1 or s.replicas < 1 or s.max_body_bytes < 1024:
            raise ValueError("max_batch_size and replicas must be >= 1, max_body_bytes >= 1024")
        if not (0 <= s.batch_wait_timeout_s <= 10):
            raise ValueError("batch_wait_timeout_s must be in [0, 10]")
        if s.int8 and s.bf16:
            raise ValueError("int8 and bf16 are two ways to score faster; set one of them (prm.int8 or prm.bf16)")
        return s


def no_checkpoint_message(kind: str = "csp") -> str:
    """How to provide a PRM checkpoint (the 503 message of /v1/score)."""
    try:
        from pcr_ray.prm.checkpoints import default_checkpoint_dir

        where = f" (it is saved to {default_checkpoint_dir(kind)} and found there)"
    except Exception:  # the PRM package may be absent: the message must still be useful
        where = ""
    return (f"no PRM checkpoint is loaded, so steps cannot be scored; /v1/verify works without one. Train "
            f"one with `pcr-ray train-prm`{where}, or start the service with "
            f"`pcr-ray serve checkpoint=/path/to/ckpt`.")


def resolve_checkpoint(settings: ServeSettings) -> Path | None:
    """The checkpoint folder to serve, or None (no PRM); a configured path that is missing is an error."""
    if not settings.prm_enabled:
        return None
    if settings.checkpoint:
        p = Path(settings.checkpoint).expanduser().resolve()
        if not p.is_dir():
            raise FileNotFoundError(f"PRM checkpoint folder {p} does not exist "
                                    f"(checkpoint={settings.checkpoint!r})")
        return p
    try:
        from pcr_ray.prm.checkpoints import find_checkpoint
    except ImportError:
        return None
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


class HandleBackend:
    """The PRM deployment behind a DeploymentHandle (`await handle.score.remote(pairs)`)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        return list(await self._handle.score.remote(pairs))

    async def info(self) -> dict[str, Any]:
        return dict(await self._handle.info.remote())


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
    from pcr_ray.prm.render import step_with_value

    return step_with_value(result.step, result.value if math.isfinite(result.value) else None)


def _render_candidate(givens: Any, prefix: Any, step: Any) -> str:
    from pcr_ray.prm.render import render_candidate

    return render_candidate(givens, prefix, step)


def plan_trace(problem: str, trace: dict[str, Any]) -> _Plan:
    """Trace form: verify the whole trace; every accepted step becomes a (context, step) pair to score."""
    from pcr_ray.prm.render import render_context

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
    from pcr_ray.prm.render import render_context

    body = {k: v for k, v in prefix.items() if k != "answer"}
    parsed, shape_errors = parse_trace(body)
    diags: list[Any] = []
    results: list[Any] = []
    state = None
    if parsed is None:
        diags = [_diag(e.step, e.code if e.code in CODES else "malformed", f"prefix.{e.path}: {e.message}")
                 for e in shape_errors]
    else:
        state, diags = VerifierState.from_givens(parsed.givens)
        if not diags and len(parsed.steps) > state.config.max_steps:
            diags = [_diag(None, "malformed", f"more than {state.config.max_steps} steps in the prefix")]
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
               checkpoint: str | None = None) -> FastAPI:
    """The FastAPI app: /v1/verify, /v1/score, /healthz, /v1/info (no Ray needed; Serve hosts it)."""
    settings = settings or ServeSettings()
    app = FastAPI(
        title=SERVICE, version=VERSION, default_response_class=SafeJSONResponse,
        description="Verify structured reasoning traces symbolically (units, arithmetic, coherence) and "
                    "score their steps with a process reward model. Verifier first: rejected steps get no "
                    "PRM score.",
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
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
              summary="verify a trace (same verdict as `pcr-ray verify --json`)")
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


# ---------------------------------------------------------------------------------------------- Ray Serve

_BATCHES_IN_FLIGHT = 8  # @serve.batch batches that may wait on the model at once (merged by ForwardCoalescer)


class ForwardCoalescer:
    """One model call at a time; whatever requests queued up meanwhile go into the next call together.

    `@serve.batch` forms its next batch while the current one runs (it only waits `batch_wait_timeout_s`
    for company), so with a forward pass slower than that, batches stay as small as the arrivals of a few
    milliseconds. Batches that wait for the model are merged here (up to `max_requests` requests per call).
    """

    def __init__(self, fn: Any, max_requests: int) -> None:
        self._fn = fn
        self.max_requests = max(1, int(max_requests))
        self._pending: list[tuple[list[list[tuple[str, str]]], asyncio.Future]] = []
        self._running = False
        self.calls = 0
        self.requests = 0
        self.pairs = 0
        self.max_requests_per_call = 0

    async def score(self, requests: list[list[tuple[str, str]]]) -> list[list[float]]:
        """Scores for each request's pairs (one list per request, in order)."""
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending.append((requests, fut))
        if not self._running:
            self._running = True
            asyncio.get_running_loop().create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                take, n = [], 0
                while self._pending and (not take or n + len(self._pending[0][0]) <= self.max_requests):
                    reqs, fut = self._pending.pop(0)
                    take.append((reqs, fut))
                    n += len(reqs)
                flat = [tuple(p) for reqs, _ in take for r in reqs for p in r]
                try:
                    scores = list(await asyncio.to_thread(self._fn, flat)) if flat else []
                    if len(scores) != len(flat):
                        raise RuntimeError(f"scorer returned {len(scores)} scores for {len(flat)} pairs")
                except Exception as exc:  # every waiting caller gets the error, none hangs
                    for _, fut in take:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                self.calls += 1
                self.requests += n
                self.pairs += len(flat)
                self.max_requests_per_call = max(self.max_requests_per_call, n)
                k = 0
                for reqs, fut in take:
                    out = []
                    for r in reqs:
                        out.append([float(x) for x in scores[k:k + len(r)]])
                        k += len(r)
                    if not fut.done():
                        fut.set_result(out)
        finally:
            self._running = False

    def stats(self) -> dict[str, int]:
        """Model calls (`batches`), requests and pairs scored, largest call in requests."""
        return {"batches": self.calls, "requests": self.requests, "pairs": self.pairs,
                "max_requests_per_batch": self.max_requests_per_call}


@serve.deployment(name="PRMScorer")
class PRMScorerDeployment:
    """The PRM (PRMScorer.from_checkpoint) behind `@serve.batch`: concurrent requests share forward passes."""

    def __init__(self, checkpoint: str, max_batch_size: int = 32, batch_wait_timeout_s: float = 0.01,
                 int8: bool = False, device: str = "cpu", scorer_max_batch: int = 64,
                 scorer_max_length: int | None = None, torch_threads: int = 0, bf16: bool = False) -> None:
        if torch_threads > 0:
            import torch

            torch.set_num_threads(torch_threads)
        from pcr_ray.prm.scorer import PRMScorer

        self.scorer = PRMScorer.from_checkpoint(checkpoint, device=device, int8=int8, bf16=bf16,
                                                max_batch=scorer_max_batch, max_length=scorer_max_length)
        self._batched.set_max_batch_size(max_batch_size)
        self._batched.set_batch_wait_timeout_s(batch_wait_timeout_s)
        self.max_batch_size = max_batch_size
        self.batch_wait_timeout_s = batch_wait_timeout_s
        self.coalescer = ForwardCoalescer(self.scorer.score, max_batch_size)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01, max_concurrent_batches=_BATCHES_IN_FLIGHT)
    async def _batched(self, requests: list[list[tuple[str, str]]]) -> list[list[float]]:
        return await self.coalescer.score(requests)

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Scores of (context, step) pairs; one call is one item of a dynamic batch."""
        if not pairs:
            return []
        return await self._batched(list(pairs))

    def info(self) -> dict[str, Any]:
        """PRMScorer.identity, the batching settings and counters."""
        return {**dict(self.scorer.identity), "max_batch_size": self.max_batch_size,
                "batch_wait_timeout_s": self.batch_wait_timeout_s, "stats": self.coalescer.stats()}


@serve.deployment(name="ScoringIngress")
@serve.ingress()
class ScoringIngress:
    """HTTP ingress: FastAPI app of `create_app`, verifier on this replica's CPU, PRM via a handle."""

    def __init__(self, prm: Any | None, settings: dict[str, Any], checkpoint: str | None = None) -> None:
        self._settings = ServeSettings.from_mapping(settings)
        self._backend = HandleBackend(prm) if prm is not None else None
        self._checkpoint = checkpoint

    def __serve_build_asgi_app__(self) -> FastAPI:
        return create_app(self._backend, self._settings, self._checkpoint)


def build_from_settings(settings: ServeSettings) -> Any:
    """The Serve application (ingress bound to a PRM deployment, or to none without a checkpoint)."""
    ckpt = resolve_checkpoint(settings)
    prm = None
    if ckpt is not None:
        prm = PRMScorerDeployment.options(
            num_replicas=settings.replicas, ray_actor_options={"num_cpus": settings.prm_num_cpus},
            # Serve's default (5 in flight per replica) would cap every batch at 5 requests
            max_ongoing_requests=max(_BATCHES_IN_FLIGHT * settings.max_batch_size, 16),
        ).bind(str(ckpt), settings.max_batch_size, settings.batch_wait_timeout_s, settings.int8,
               settings.device, settings.scorer_max_batch, settings.scorer_max_length, settings.torch_threads,
               settings.bf16)
    ingress = ScoringIngress.options(ray_actor_options={"num_cpus": settings.ingress_num_cpus},
                                     max_ongoing_requests=settings.max_ongoing_requests)
    return ingress.bind(prm, asdict(settings), str(ckpt) if ckpt else None)


def build_app(args: dict[str, Any] | None = None) -> Any:
    """`serve deploy` / `serve run` app builder (import_path pcr_ray.serve:build_app, `args` = settings)."""
    return build_from_settings(ServeSettings.from_mapping(args or {}))


@dataclass
class RunningService:
    """A started service: its base URL; `stop()` deletes the app (and shuts down what `start` started)."""

    url: str
    settings: ServeSettings
    checkpoint: str | None
    owns_serve: bool
    owns_ray: bool

    def stop(self) -> None:
        import ray

        if self.owns_serve:
            serve.shutdown()
        else:
            serve.delete(self.settings.app_name)
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is not "in use"
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _serve_client() -> Any | None:
    """The running Serve controller's client in this Ray cluster, or None when Serve is not started."""
    from ray.serve.context import _get_global_client

    return _get_global_client(raise_if_no_controller_running=False)


def start(settings: ServeSettings | Mapping[str, Any] | None = None) -> RunningService:
    """Start (local Ray if none,) Serve on host:port (unless already running), and the app; returns when ready.

    When Serve already runs in this cluster its HTTP host/port stay as they are (Serve's options are
    cluster-wide); the returned URL says where the app really is.
    """
    import ray

    s = settings if isinstance(settings, ServeSettings) else ServeSettings.from_mapping(settings)
    owns_ray = False
    if not ray.is_initialized():
        ray.init(address=s.ray_address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}})
        owns_ray = True
    client = _serve_client()
    owns_serve = client is None
    host, port = s.host, s.port
    try:
        if owns_serve:
            if not _port_free(s.host, s.port):
                raise OSError(f"port {s.port} on {s.host} is in use; choose another, e.g. "
                              f"`pcr-ray serve port={s.port + 1}`")
            serve.start(http_options={"host": s.host, "port": s.port})
        else:
            host, port = client.http_config.host, client.http_config.port
        app = build_from_settings(s)
        ckpt = resolve_checkpoint(s)
        serve.run(app, name=s.app_name, route_prefix=s.route_prefix)
    except BaseException:
        if owns_serve and _serve_client() is not None:
            serve.shutdown()
        if owns_ray:
            ray.shutdown()
        raise
    prefix = "" if s.route_prefix in ("/", "") else s.route_prefix.rstrip("/")
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}{prefix}"
    return RunningService(url, s, str(ckpt) if ckpt else None, owns_serve, owns_ray)


def run(cfg: Mapping[str, Any] | None = None, *, block: bool = True) -> int:
    """`pcr-ray serve` as a function: start the service and (block=True) serve until Ctrl-C."""
    try:
        svc = start(cfg)
    except (FileNotFoundError, OSError, ValueError) as exc:
        print(f"pcr-ray serve: {exc}", file=sys.stderr)
        return 2
    prm = f"PRM checkpoint {svc.checkpoint}" if svc.checkpoint else "no PRM checkpoint: /v1/score answers 503"
    print(f"pcr_ray scoring service at {svc.url}  (OpenAPI docs {svc.url}/docs; {prm})", flush=True)
    if not block:
        svc.stop()
        return 0

    def _term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _term)  # `kill PID` stops it as cleanly as Ctrl-C
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        print("stopping ...", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        svc.stop()
    return 0


def main(argv: list[str]) -> int:
    """`pcr-ray serve [key=value ...]` (Hydra app over conf/serve.yaml)."""
    import hydra
    from omegaconf import DictConfig, OmegaConf

    from pcr_ray.config import conf_dir

    result = {"rc": 0}

    @hydra.main(config_path=str(conf_dir()), config_name="serve", version_base="1.3")
    def _app(cfg: DictConfig) -> None:
        result["rc"] = run(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]

    saved = sys.argv
    sys.argv = ["pcr-ray-serve", *argv]
    try:
        _app()
    finally:
        sys.argv = saved
    return result["rc"]
