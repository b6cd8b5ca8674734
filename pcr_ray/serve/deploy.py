"""Ray Serve deployment of the scoring app (`pcr-ray serve`): ingress + PRM deployment with dynamic batching.

Two deployments: `ScoringIngress` (the FastAPI app of `pcr_ray.serve.app`; runs the symbolic verifier on its own
CPU) and `PRMScorerDeployment` (the PRM, batched across requests). `build_app` is the `serve deploy` import
path. HTTP requests to the Serve proxy need no Ray auth token (token auth guards Ray's own APIs and the
dashboard, which `serve deploy` talks to).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import signal
import socket
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

import ray
from fastapi import FastAPI
from omegaconf import DictConfig
from ray import serve
from ray.exceptions import RayActorError
from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE
from ray.serve.context import _get_global_client

from pcr_ray.commands.hydra_app import hydra_command
from pcr_ray.pipeline.ray_runtime import init_ray, shutdown_ray
from pcr_ray.prm.build import build_scorer
from pcr_ray.serve.app import ServeSettings, auth_for, create_app, resolve_checkpoint
from pcr_ray.serve.auth import ApiKeyAuth

log = logging.getLogger(__name__)


def release_free_memory() -> None:
    """Give the heap's free pages back to the OS (glibc `malloc_trim`); a no-op where libc has no such call.

    The forward passes allocate activations of a different shape for every batch; without a trim the freed
    pages stay with the process and its RSS creeps up under varied load. Called on the forward thread when the
    replica goes idle (no request waits after a model call).
    """
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM: Any = None


@serve.deployment(name="PRMScorer")
class PRMScorerDeployment:
    """The PRM (pcr_ray.prm.build) batched by `@serve.batch`: concurrent requests share forward passes.

    One model call at a time, on one thread. A request that arrives while a call runs waits for it to end; then
    every request that waited goes into the next call together (up to `max_batch_size` requests). A lone request
    is scored at once (`batch_wait_timeout_s=0`); under load the calls grow with the queue. Without that wait,
    `@serve.batch` would take each request into a batch of its own as soon as it arrived, and the batches would
    queue behind the running call one request each.
    """

    def __init__(self, checkpoint: str, max_batch_size: int = 32, int8: bool = False, device: str = "cpu",
                 scorer_max_batch: int = 64, scorer_max_length: int | None = None, torch_threads: int = 0,
                 bf16: bool = False, runtime: str = "torch", cache_size: int = 0, family: str = "cross_encoder",
                 convention: str | None = None) -> None:
        if torch_threads > 0:
            import torch  # heavy: torch

            torch.set_num_threads(torch_threads)

        prm_cfg = {"device": device, "runtime": runtime, "int8": int8, "bf16": bf16, "max_batch": scorer_max_batch,
                   "cache_size": cache_size, "family": family, "convention": convention}
        self.scorer = build_scorer(prm_cfg, checkpoint, max_length=scorer_max_length)
        self._init_batching(max_batch_size)

    def _init_batching(self, max_batch_size: int) -> None:
        self.max_batch_size = max(1, int(max_batch_size))
        self.score_batch.set_max_batch_size(self.max_batch_size)
        # every model call on the same thread: one malloc arena for the forward passes, not one per pool thread
        self._forward_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prm-forward")
        self._idle = asyncio.Event()  # set while no model call runs: requests wait for it to enter a batch
        self._idle.set()
        self._in_flight = 0  # requests in `score`, batched or waiting
        self.calls = self.requests = self.pairs = self.max_requests_per_call = 0

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Scores of (context, step) pairs; one call is one request of a batch."""
        if not pairs:
            return []
        self._in_flight += 1
        try:
            await self._idle.wait()  # a model call runs: wait for it, then enter the next batch with the others
            return await self.score_batch([tuple(p) for p in pairs])
        finally:
            self._in_flight -= 1

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0, max_concurrent_batches=1)
    async def score_batch(self, requests: list[list[tuple[str, str]]]) -> list[list[float]]:
        """One model call for a batch of requests (`@serve.batch`; max_batch_size is set per replica)."""
        self._idle.clear()
        try:
            return await self.forward(requests)
        finally:
            self._idle.set()
            if self._in_flight <= len(requests):  # nobody waits: idle now, trim on the forward thread
                self._forward_thread.submit(release_free_memory)

    async def forward(self, requests: list[list[tuple[str, str]]]) -> list[list[float]]:
        """Scores of each request's pairs from one model call on the forward thread (one list per request)."""
        flat = [tuple(p) for r in requests for p in r]
        loop = asyncio.get_running_loop()
        scores = list(await loop.run_in_executor(self._forward_thread, self.scorer.score, flat)) if flat else []
        if len(scores) != len(flat):
            raise RuntimeError(f"scorer returned {len(scores)} scores for {len(flat)} pairs")
        self.calls += 1
        self.requests += len(requests)
        self.pairs += len(flat)
        self.max_requests_per_call = max(self.max_requests_per_call, len(requests))
        out, k = [], 0
        for r in requests:
            out.append([float(x) for x in scores[k:k + len(r)]])
            k += len(r)
        return out

    def stats(self) -> dict[str, int]:
        """Model calls (`batches`), requests and pairs scored, largest call in requests."""
        return {"batches": self.calls, "requests": self.requests, "pairs": self.pairs,
                "max_requests_per_batch": self.max_requests_per_call}

    def info(self) -> dict[str, Any]:
        """PRMScorer.identity, the batching settings and counters."""
        return {**dict(self.scorer.identity), "max_batch_size": self.max_batch_size,
                "stats": self.stats(), "cache": self.scorer.cache.stats()}


REPLICA_RETRIES = 2  # a /v1/score request is sent again this many times when its PRM replica dies under it


class HandleBackend:
    """The PRM deployment behind a DeploymentHandle (`await handle.score.remote(pairs)`)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """The scores; a request whose PRM replica died under it (a lost node, a killed replica) is sent again,
        to a live replica, up to REPLICA_RETRIES times: scoring has no side effects."""
        for _ in range(REPLICA_RETRIES):
            try:
                return list(await self._handle.score.remote(pairs))
            except RayActorError:  # the replica died or cannot be reached: Serve routes the next try elsewhere
                continue
        return list(await self._handle.score.remote(pairs))

    async def info(self) -> dict[str, Any]:
        return dict(await self._handle.info.remote())


@serve.deployment(name="ScoringIngress")
@serve.ingress()
class ScoringIngress:
    """HTTP ingress: FastAPI app of `create_app`, verifier on this replica's CPU, PRM via a handle."""

    def __init__(self, prm: Any | None, settings: dict[str, Any], checkpoint: str | None = None,
                 key_digest: str | None = None) -> None:
        self._settings = ServeSettings(**settings)  # checked by the builder: the replica composes no config
        self._backend = HandleBackend(prm) if prm is not None else None
        self._checkpoint = checkpoint
        self._auth = ApiKeyAuth(key_digest)  # resolved by the builder; the replica needs neither env nor file

    def __serve_build_asgi_app__(self) -> FastAPI:
        return create_app(self._backend, self._settings, self._checkpoint, self._auth)


def build_from_settings(settings: ServeSettings) -> Any:
    """The Serve application (ingress bound to a PRM deployment, or to none without a checkpoint).

    The API-key policy is resolved here, for the host Serve really listens on when Serve already runs
    (`serve deploy` sets it in http_options): only the key's digest reaches the ingress.
    """
    auth = auth_for(_with_serve_host(settings))
    ckpt = resolve_checkpoint(settings)
    prm = None
    if ckpt is not None:
        prm = PRMScorerDeployment.options(
            **replica_options(settings),
            ray_actor_options={"num_cpus": settings.prm_num_cpus, "num_gpus": settings.prm_num_gpus},
            # Serve's default (5 in flight per replica) would cap every model call at 5 requests
            max_ongoing_requests=max(2 * settings.max_batch_size, 16),
        ).bind(str(ckpt), settings.max_batch_size, settings.int8,
               settings.device, settings.scorer_max_batch, settings.scorer_max_length, settings.torch_threads,
               settings.bf16, settings.runtime, settings.cache_size, settings.family, settings.convention)
    ingress = ScoringIngress.options(ray_actor_options={"num_cpus": settings.ingress_num_cpus},
                                     max_ongoing_requests=settings.max_ongoing_requests)
    return ingress.bind(prm, asdict(settings), str(ckpt) if ckpt else None, auth.key_digest)


def replica_options(settings: ServeSettings) -> dict[str, Any]:
    """The PRM deployment's replica count: fixed (`num_replicas`), or Serve's `autoscaling_config` between
    `replicas` and `max_replicas`."""
    if settings.max_replicas is None or settings.max_replicas == settings.replicas:
        return {"num_replicas": settings.replicas}
    return {"autoscaling_config": {
        "min_replicas": settings.replicas, "initial_replicas": settings.replicas,
        "max_replicas": settings.max_replicas, "target_ongoing_requests": settings.target_ongoing_requests,
        "upscale_delay_s": settings.upscale_delay_s, "downscale_delay_s": settings.downscale_delay_s}}


def _with_serve_host(settings: ServeSettings) -> ServeSettings:
    """`settings` with the HTTP host of the Serve instance already running in this cluster, if there is one."""
    if not ray.is_initialized():  # building the graph only (no cluster): ServeSettings.host is the host
        return settings
    try:
        client = _serve_client()
        host = client.http_config.host if client is not None else None
    except Exception:  # no Ray connection yet (ServeSettings.host is where start() will bind)
        host = None
    return replace(settings, host=str(host)) if host else settings


def build_app(args: dict[str, Any] | None = None) -> Any:
    """`serve deploy` / `serve run` app builder (import_path pcr_ray.serve.deploy:build_app, `args` = settings)."""
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
        if self.owns_serve:
            shutdown_serve()
        else:
            serve.delete(self.settings.app_name)
        if self.owns_ray:
            shutdown_ray()


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is not "in use"
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def shutdown_serve(timeout_s: float = 300.0) -> None:
    """`serve.shutdown()`, then wait until Serve's controller has exited.

    Serve waits 30 s for its controller's graceful shutdown; on a loaded machine it takes longer and goes on in
    the background, and a Serve started meanwhile can lose its new HTTP proxy to it. Waiting here keeps a stop
    followed by a start apart.
    """
    serve.shutdown()
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
        except ValueError:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"Serve's controller was still running {timeout_s:.0f} s after serve.shutdown(); "
                               "see its log under the Ray session's logs/ (controller_*.log)")
        time.sleep(0.2)


def _serve_client() -> Any | None:
    """The running Serve controller's client in this Ray cluster, or None when Serve is not started."""
    return _get_global_client(raise_if_no_controller_running=False)


def start(settings: ServeSettings | Mapping[str, Any] | None = None) -> RunningService:
    """Start (local Ray if none,) Serve on host:port (unless already running), and the app; returns when ready.

    `settings`: ServeSettings, or some of their keys on top of conf/serve.yaml's (ServeSettings.from_mapping).
    When Serve already runs in this cluster its HTTP host/port stay as they are (Serve's options are
    cluster-wide); the returned URL says where the app really is.
    """
    s = settings if isinstance(settings, ServeSettings) else ServeSettings.from_mapping(settings)
    auth_for(s)  # beyond loopback without an API key: refuse before starting anything
    owns_ray = not ray.is_initialized()
    if owns_ray:
        init_ray({"address": s.ray_address, "log_to_driver": False})
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
            shutdown_serve()
        if owns_ray:
            shutdown_ray()
        raise
    prefix = "" if s.route_prefix in ("/", "") else s.route_prefix.rstrip("/")
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}{prefix}"
    return RunningService(url, s, str(ckpt) if ckpt else None, owns_serve, owns_ray)


def run(cfg: DictConfig | Mapping[str, Any], *, block: bool = True) -> int:
    """`pcr-ray serve` as a function: check the composed `serve` config (configs.check), start the service and
    (block=True) serve until Ctrl-C."""
    try:
        svc = start(ServeSettings.from_config(cfg))
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
        log.info("stopping ...")
    finally:
        signal.signal(signal.SIGTERM, previous)
        svc.stop()
    return 0


USAGE = """usage: pcr-ray serve [key=value ...]

The Ray Serve scoring endpoint (/v1/score, /v1/verify; OpenAPI docs at /docs) over conf/serve.yaml, served until
Ctrl-C. e.g.  pcr-ray serve port=8000 prm.checkpoint=/path/to/prm"""

main = hydra_command("serve", "serve", run, USAGE)
