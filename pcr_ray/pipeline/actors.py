"""Long-lived model actors (generator, PRM scorer) and the thin proxies search code calls.

The driver creates each actor once per job under a name derived from its config (`.options(name=...,
get_if_exists=True)`), so every search worker, every batch and every run of a Hydra sweep in the same
process share it. `num_gpus`/`num_cpus` come from the config; `max_restarts`/`max_task_retries` make a
crashed model actor come back and its in-flight calls be retried. The proxies expose `.propose()` and
`.score()` and block on `ray.get`, so pcr_ray.search stays free of Ray.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from pcr_ray.generators.base import backend_of, build_generator, uses_feedback
from pcr_ray.generators.model_folder import resolve_model
from pcr_ray.pipeline.shipping import ShippedFolder, receive, ship
from pcr_ray.prm.build import build_scorer
from pcr_ray.search.usage import propose_counted, score_counted

# Environment variable of the fault-injection hook: a JSON object {"<site>": "<marker path>"}; the first call
# at that site in any process creates the marker and exits the process (os._exit) - used by the tests.
FAULT_ENV = "PCR_RAY_FAULT_INJECT"
FAULT_SITES = ("search_worker", "generator_actor", "prm_actor")
STALL = "stall:"  # a marker path with this prefix: the call hangs instead (a replica lost without dying)


def maybe_inject_fault(site: str, faults: Mapping[str, str] | None = None) -> None:
    """Exit this process once for `site` when fault injection names it (the marker file makes it once only); with
    a `stall:<marker>` value, the call never returns instead (a replica whose node went quiet)."""
    spec = dict(faults or {})
    if not spec and os.environ.get(FAULT_ENV):
        try:
            spec = json.loads(os.environ[FAULT_ENV])
        except ValueError:
            spec = {}
    marker = spec.get(site)
    if not marker:
        return
    stall = str(marker).startswith(STALL)
    marker = str(marker).removeprefix(STALL)
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # atomic: only one process wins
    except FileExistsError:
        return
    os.write(fd, f"{site} pid={os.getpid()} t={time.time():.3f}\n".encode())
    os.close(fd)
    if stall:
        time.sleep(24 * 3600)
    os._exit(17)


def config_digest(obj: Any) -> str:
    """A short stable hash of a config mapping (names the actor that serves it)."""
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:10]


@ray.remote
class GeneratorActor:
    """Hosts one generator (llama.cpp, or the enumerator) and serves batched propose() calls (vLLM: VLLMEngineActor)."""

    def __init__(self, gen_cfg: Mapping[str, Any], faults: Mapping[str, str] | None = None,
                 torch_threads: int | None = None) -> None:
        if torch_threads:
            _set_threads(torch_threads)
        self._faults = dict(faults or {})
        self.gen = build_generator(dict(gen_cfg))
        self.calls = 0
        self.requests = 0
        self.seconds = 0.0
        self._uses_feedback = uses_feedback(self.gen)
        self._tickets = 0

    def next_ticket(self) -> int:
        """A number unique among the callers of this actor: workers use it to spread over replicas."""
        self._tickets += 1
        return self._tickets - 1

    def propose(self, requests: Sequence[Any]) -> list[list[str]]:
        return self.propose_counted(requests)[0]

    def propose_counted(self, requests: Sequence[Any]) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """Candidates and (prompt, output) tokens per request (pcr_ray.search.usage)."""
        maybe_inject_fault("generator_actor", self._faults)
        t0 = time.perf_counter()
        out = propose_counted(self.gen, list(requests))
        self.calls += 1
        self.requests += len(requests)
        self.seconds += time.perf_counter() - t0
        return out

    def info(self) -> dict[str, Any]:
        ident = getattr(self.gen, "identity", None)
        ident = ident() if callable(ident) else (ident or {})
        return {"identity": ident, "uses_feedback": self._uses_feedback, "pid": os.getpid(),
                "node": ray.get_runtime_context().get_node_id(), "calls": self.calls, "requests": self.requests,
                "seconds": self.seconds}


@ray.remote
class VLLMEngineActor:
    """Hosts one vLLM AsyncLLM engine; its async propose() lets every search worker's batch into the engine at once.

    An async actor: up to `max_concurrency` propose() calls are in flight together and vLLM's scheduler batches
    all their requests (continuous batching). The engine's own process dying is handled by the generator (engine
    rebuilt, batch retried); this actor's process dying by Ray (max_restarts, max_task_retries).
    """

    def __init__(self, gen_cfg: Mapping[str, Any], faults: Mapping[str, str] | None = None,
                 torch_threads: int | None = None) -> None:
        self._faults = dict(faults or {})
        self.gen = build_generator(dict(gen_cfg))
        self.gen.start()  # start the engine now (minutes on a GPU): callers then wait on generation only
        self.calls = 0
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._tickets = 0

    def next_ticket(self) -> int:
        """A number unique among the callers of this actor: workers use it to spread over replicas."""
        self._tickets += 1
        return self._tickets - 1

    async def propose(self, requests: Sequence[Any]) -> list[list[str]]:
        return (await self.propose_counted(requests))[0]

    async def propose_counted(self, requests: Sequence[Any]) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """Candidates and (prompt, output) tokens per request, as the engine counts them."""
        maybe_inject_fault("generator_actor", self._faults)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            out = await self.gen.propose_counted_async(list(requests))
        finally:
            self.in_flight -= 1
        self.calls += 1
        self.requests += len(requests)
        return out

    def engine_pids(self) -> list[int]:
        """PIDs of the engine's processes (the tests kill one to check the restart)."""
        return self.gen.engine_pids()

    def info(self) -> dict[str, Any]:
        return {"identity": dict(self.gen.identity), "uses_feedback": True, "pid": os.getpid(),
                "node": ray.get_runtime_context().get_node_id(), "calls": self.calls, "requests": self.requests,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "seconds": round(self.gen.stats.seconds, 4), "stats": self.gen.stats.to_dict()}


def vllm_placement(gen_cfg: Mapping[str, Any], acfg: Mapping[str, Any]) -> dict[str, Any]:
    """Resources of a vLLM engine actor: tensor_parallel_size GPUs (a placement group above 1) or CPUs.

    Returns actor options (num_gpus, num_cpus) and `bundles`: None, or the placement group's bundles (one GPU
    each; the actor and vLLM's Ray workers are scheduled into it). A one-GPU engine takes actors.generator.num_gpus
    of a GPU when that is a share below 1 (its generator.gpu_memory_utilization should leave the rest's memory),
    else a whole one. On CPU the actor holds num_cpus CPUs (actors.generator.num_cpus, else the generator's
    num_cpus, else 1) and actors.generator.num_gpus GPUs (0 unless set: a placement on a node that declares GPUs,
    as the tests' cluster of a GPU cluster's shape does).
    """
    device = str(gen_cfg.get("device", "cuda"))
    tp = int(gen_cfg.get("tensor_parallel_size", 1) or 1)
    cpus = float(acfg.get("num_cpus") or gen_cfg.get("num_cpus") or 1)
    if device == "cpu":  # actors.generator.num_gpus still reserves GPUs: a node's, for placement alone
        if tp != 1:
            raise ValueError(f"vllm generator on cpu: tensor_parallel_size must be 1, got {tp}")
        return {"num_gpus": float(acfg.get("num_gpus") or 0.0), "num_cpus": cpus, "bundles": None}
    if tp == 1:  # a whole GPU, or the share actors.generator.num_gpus names (0 < x < 1: a PRM beside it)
        share = float(acfg.get("num_gpus") or 1.0)
        if not 0 < share <= 1:
            raise ValueError(f"actors.generator.num_gpus={share:g} for a one-GPU vLLM engine: a share of one GPU in "
                             f"(0, 1]; more GPUs per engine is generator.tensor_parallel_size")
        return {"num_gpus": share, "num_cpus": cpus, "bundles": None}
    return {"num_gpus": 0.0, "num_cpus": 0.0, "bundles": [{"GPU": 1.0, "CPU": cpus}] + [{"GPU": 1.0}] * (tp - 1)}


def engine_placement_group(name: str, bundles: list[dict[str, float]]) -> Any:
    """The placement group of a tensor-parallel engine: all its GPUs on one node (STRICT_PACK), since vLLM's
    tensor parallelism runs over the node's own links; a cluster of one-GPU nodes never places it."""
    return placement_group(bundles, strategy="STRICT_PACK", name=f"{name}-pg")


def _vllm_actor(name: str, gen_cfg: Mapping[str, Any], acfg: Mapping[str, Any], namespace: str | None,
                faults: Mapping[str, str] | None) -> Any:
    """Create (or get) one vLLM engine actor with its GPUs/CPUs reserved (vllm_placement)."""
    try:
        return ray.get_actor(name, namespace=namespace)  # another driver of this job made it
    except ValueError:
        pass
    place = vllm_placement(gen_cfg, acfg)
    opts = _actor_options(name, acfg, namespace)
    opts.update(num_gpus=place["num_gpus"], num_cpus=place["num_cpus"])
    # an async actor: at least 64 calls in flight unless the config asks for more
    opts["max_concurrency"] = max(int(acfg["max_concurrency"]), 64)
    if place["bundles"]:
        pg = engine_placement_group(name, place["bundles"])
        try:
            ray.get(pg.ready(), timeout=float(acfg["start_timeout_s"]))
        except ray.exceptions.GetTimeoutError:
            remove_placement_group(pg)
            raise ActorStartError(f"{name}: the placement group of {len(place['bundles'])} GPUs on one node "
                                  f"(generator.tensor_parallel_size) was not ready within {acfg['start_timeout_s']} s; "
                                  f"the cluster has {_resources(ray.cluster_resources())}: `pcr-ray plan` shows what "
                                  f"fits") from None
        _PGS[name] = pg
        opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True)
    return VLLMEngineActor.options(**opts).remote(gen_cfg, faults, acfg.get("torch_threads"))


@ray.remote
class PRMActor:
    """Hosts one PRM scorer (a checkpoint folder, shipped from the driver when this node lacks it) and serves
    batched score() calls."""

    def __init__(self, prm_cfg: Mapping[str, Any], checkpoint: ShippedFolder | str,
                 faults: Mapping[str, str] | None = None, torch_threads: int | None = None) -> None:
        if torch_threads:
            _set_threads(torch_threads)
        self._faults = dict(faults or {})
        self.checkpoint = str(receive(checkpoint))
        self.scorer = load_scorer(prm_cfg, self.checkpoint)
        self.calls = 0
        self.pairs = 0
        self.seconds = 0.0
        self._tickets = 0

    def next_ticket(self) -> int:
        """A number unique among the callers of this actor: workers use it to spread over replicas."""
        self._tickets += 1
        return self._tickets - 1

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return self.score_counted(pairs)[0]

    def score_counted(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
        """Scores and the tokens the PRM encodes per pair (pcr_ray.search.usage)."""
        maybe_inject_fault("prm_actor", self._faults)
        t0 = time.perf_counter()
        scores, tokens = score_counted(self.scorer, list(pairs))
        self.calls += 1
        self.pairs += len(pairs)
        self.seconds += time.perf_counter() - t0
        return [float(x) for x in scores], tokens

    def info(self) -> dict[str, Any]:
        cache = getattr(self.scorer, "cache", None)
        return {"identity": dict(getattr(self.scorer, "identity", {}) or {}), "pid": os.getpid(),
                "node": ray.get_runtime_context().get_node_id(), "checkpoint_here": self.checkpoint,
                "calls": self.calls, "pairs": self.pairs, "seconds": self.seconds,
                "cache": cache.stats() if cache is not None else None}


def _set_threads(n: int) -> None:
    try:
        import torch  # heavy: torch

        torch.set_num_threads(int(n))
    except ImportError:
        pass


def load_scorer(prm_cfg: Mapping[str, Any], checkpoint: str) -> Any:
    """A PRMScorer on the checkpoint folder the driver resolved; missing on this node is an error, never a retrain."""
    return build_scorer(prm_cfg, checkpoint)  # at the length the checkpoint was trained at


class ReplicasUnavailable(RuntimeError):
    """Every replica of a model actor is gone or did not answer within the call timeout."""


class _ReplicaProxy:
    """Calls on one of a model's actor replicas (the `slot`-th); a replica that is gone (its restarts spent) or does
    not answer within `timeout_s` (its node lost, a restart that cannot be placed) is left for the next one, and
    the proxy stays on the replica that answered."""

    kind = "model"

    def __init__(self, handles: Sequence[Any], slot: int = 0, timeout_s: float | None = None) -> None:
        if not handles:
            raise ValueError(f"{type(self).__name__} needs at least one actor handle")
        self.handles = list(handles)
        self.slot = slot % len(self.handles)
        self.timeout_s = timeout_s
        self.calls = 0
        self.failovers = 0

    @property
    def handle(self) -> Any:
        return self.handles[self.slot]

    def _call(self, method: str, arg: list[Any]) -> Any:
        self.calls += 1
        failed: list[str] = []
        for step in range(len(self.handles)):
            i = (self.slot + step) % len(self.handles)
            ref = getattr(self.handles[i], method).remote(arg)
            try:
                out = ray.get(ref, timeout=self.timeout_s)
            except ray.exceptions.GetTimeoutError:
                ray.cancel(ref)
                failed.append(f"replica {i}: no answer within {self.timeout_s:g}s")
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                failed.append(f"replica {i}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            else:
                self.failovers += step
                self.slot = i
                return out
        raise ReplicasUnavailable(f"every {self.kind} replica failed ({len(self.handles)}): " + "; ".join(failed))


class GeneratorProxy(_ReplicaProxy):
    """`.propose(requests)` on the generator's actor replicas (_ReplicaProxy: one at a time, failing over)."""

    kind = "generator"

    def __init__(self, handles: Sequence[Any], uses_feedback: bool = True, slot: int = 0,
                 timeout_s: float | None = None) -> None:
        super().__init__(handles, slot, timeout_s)
        self.uses_feedback = uses_feedback

    def propose(self, requests: Sequence[Any]) -> list[list[str]]:
        return self.propose_counted(requests)[0]

    def propose_counted(self, requests: Sequence[Any]) -> tuple[list[list[str]], list[tuple[int, int]]]:
        """Candidates and (prompt, output) tokens per request (pcr_ray.search.usage)."""
        if not requests:
            return [], []
        out, usage = self._call("propose_counted", list(requests))
        return out, [tuple(u) for u in usage]


class ScorerProxy(_ReplicaProxy):
    """`.score(pairs)` on the PRM's actor replicas (_ReplicaProxy: one at a time, failing over)."""

    kind = "PRM"

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return self.score_counted(pairs)[0]

    def score_counted(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
        """Scores and the tokens the PRM encodes per pair (pcr_ray.search.usage)."""
        if not pairs:
            return [], []
        scores, tokens = self._call("score_counted", list(pairs))
        return list(scores), list(tokens)


@dataclass(frozen=True)
class ActorRef:
    """How a worker finds a model: actor names in a namespace, or a config to build it in-process."""

    kind: str                      # "generator" | "prm"
    names: tuple[str, ...] = ()    # named actors (replicas) when remote
    namespace: str | None = None
    local_cfg: Mapping[str, Any] | None = None  # build in the worker instead (model-free generators)
    uses_feedback: bool = True
    checkpoint: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)
    call_timeout_s: float | None = None  # a call unanswered by then goes to the next replica


def _actor_options(name: str, acfg: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
    """Ray actor options from a checked `actors.<role>` config (pcr_ray.configs.ActorConfig: every key present)."""
    opts: dict[str, Any] = {
        "name": name, "get_if_exists": True,
        "num_cpus": float(acfg["num_cpus"]),
        "num_gpus": float(acfg["num_gpus"]),
        "max_restarts": int(acfg["max_restarts"]),
        "max_task_retries": int(acfg["max_task_retries"]),
        "max_concurrency": int(acfg["max_concurrency"]),
    }
    if namespace:
        opts["namespace"] = namespace
    return opts


class ActorStartError(RuntimeError):
    """A model actor did not start in time (its resources never came free, or its model failed to load)."""


def wait_started(handles: Sequence[Any], names: Sequence[str], acfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """info() of each actor once it has started, waiting at most actors.<role>.start_timeout_s; an actor still
    not up then is killed and an ActorStartError names it, what it asked and what the cluster has."""
    refs = [h.info.remote() for h in handles]
    timeout = float(acfg["start_timeout_s"])
    _, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    if pending:
        late = [n for n, r in zip(names, refs, strict=True) if r in pending]
        for n, h in zip(names, handles, strict=True):
            if n in late:
                ray.kill(h, no_restart=True)
                _LIVE.pop(n, None)
        raise ActorStartError(
            f"{', '.join(late)} did not start within {timeout:g} s (actors.*.start_timeout_s): each asked "
            f"{float(acfg['num_cpus']):g} CPU and {float(acfg['num_gpus']):g} GPU; the cluster has "
            f"{_resources(ray.cluster_resources())} in all, {_resources(ray.available_resources())} free now. "
            f"Either its resources never came free (`pcr-ray plan` shows what fits) or its model is still "
            f"loading (a large model from the hub: raise start_timeout_s); the actor's log says which")
    return ray.get(refs)


def _resources(r: Mapping[str, float]) -> str:
    return ", ".join(f"{r.get(k, 0):g} {k}" for k in ("CPU", "GPU"))


# Actors this driver process created, by name; a run kills the ones it does not use (a sweep over model
# sizes must not keep every model resident).
_LIVE: dict[str, Any] = {}
_PGS: dict[str, Any] = {}  # placement groups of multi-GPU vLLM actors, by actor name


def generator_runs_locally(gen_cfg: Mapping[str, Any], acfg: Mapping[str, Any]) -> bool:
    """Placement 'local' builds the generator inside each search worker; 'auto' does so for model-free backends."""
    placement = str(acfg["placement"])
    if placement == "local":
        return True
    if placement == "actor":
        return False
    return backend_of(gen_cfg).model_free


def ensure_generator(gen_cfg: Mapping[str, Any], acfg: Mapping[str, Any], namespace: str | None,
                     faults: Mapping[str, str] | None = None) -> ActorRef:
    """The generator for this config: named actor replicas (created if missing) or an in-worker build recipe."""
    gen_cfg = dict(gen_cfg)
    if str(gen_cfg.get("model") or "").startswith("sft:"):
        # a quick fine-tune is trained here, on the driver's cores, once; the actors load its folder (a
        # single-node recipe: on a cluster, `model` is a folder on shared storage or a hub name)
        gen_cfg["model"] = resolve_model(str(gen_cfg["model"]))
    if generator_runs_locally(gen_cfg, acfg):
        return ActorRef("generator", local_cfg=gen_cfg, uses_feedback=uses_feedback(build_generator(gen_cfg)))
    digest = config_digest({"cfg": gen_cfg, "actor": dict(acfg), "faults": dict(faults or {})})
    names = []
    handles = []
    for i in range(max(1, int(acfg["replicas"]))):
        name = f"pcr-gen-{digest}-{i}"
        if _LIVE.get(name) is not None:
            h = _LIVE[name]
        elif backend_of(gen_cfg).async_engine:
            h = _vllm_actor(name, gen_cfg, acfg, namespace, faults)
        else:
            h = GeneratorActor.options(**_actor_options(name, acfg, namespace)).remote(
                gen_cfg, faults, acfg.get("torch_threads"))
        _LIVE[name] = h  # the creating handle keeps a non-detached actor alive: never replace it
        names.append(name)
        handles.append(h)
    infos = wait_started(handles, names, acfg)
    return ActorRef("generator", tuple(names), namespace, uses_feedback=bool(infos[0]["uses_feedback"]),
                    info=infos[0], call_timeout_s=_timeout(acfg))


def ensure_prm(prm_cfg: Mapping[str, Any], checkpoint: str | Path, acfg: Mapping[str, Any], namespace: str | None,
               faults: Mapping[str, str] | None = None) -> ActorRef:
    """Named PRM actor replicas serving this checkpoint (created if missing)."""
    prm_cfg = dict(prm_cfg)
    digest = config_digest({"cfg": prm_cfg, "checkpoint": str(checkpoint), "actor": dict(acfg),
                            "faults": dict(faults or {})})
    names, handles = [], []
    for i in range(max(1, int(acfg["replicas"]))):
        name = f"pcr-prm-{digest}-{i}"
        h = _LIVE.get(name) or PRMActor.options(**_actor_options(name, acfg, namespace)).remote(
            prm_cfg, ship(checkpoint), faults, acfg.get("torch_threads"))
        _LIVE[name] = h
        names.append(name)
        handles.append(h)
    infos = wait_started(handles, names, acfg)
    return ActorRef("prm", tuple(names), namespace, checkpoint=str(checkpoint), info=infos[0],
                    call_timeout_s=_timeout(acfg))


def _timeout(acfg: Mapping[str, Any]) -> float | None:
    """An actor group's call timeout: its `call_timeout_s`, none when 0."""
    t = float(acfg.get("call_timeout_s") or 0)
    return t if t > 0 else None


def release_unused(keep: Sequence[str]) -> list[str]:
    """Kill the model actors this process created that are not in `keep`; returns their names."""
    gone = []
    for name in list(_LIVE):
        if name not in keep:
            try:
                ray.kill(_LIVE.pop(name), no_restart=True)
            except Exception:  # already dead
                pass
            if name in _PGS:
                remove_placement_group(_PGS.pop(name))
            gone.append(name)
    return gone


def release_all() -> None:
    """Kill every model actor this process created."""
    release_unused(())


def connect(ref: ActorRef | None) -> Any:
    """In a worker: a proxy (or an in-process generator) for an ActorRef; None for None.

    With several replicas, each worker takes a ticket from the first one and keeps to replica
    ticket % replicas, so N workers spread evenly over the replicas (and each call is one batch).
    """
    if ref is None:
        return None
    if ref.local_cfg is not None:
        return build_generator(dict(ref.local_cfg))
    handles = [ray.get_actor(n, namespace=ref.namespace) for n in ref.names]
    slot = ray.get(handles[0].next_ticket.remote()) if len(handles) > 1 else 0
    if ref.kind == "generator":
        return GeneratorProxy(handles, ref.uses_feedback, slot=slot, timeout_s=ref.call_timeout_s)
    return ScorerProxy(handles, slot=slot, timeout_s=ref.call_timeout_s)


def prm_cache_stats(info: Mapping[str, Any]) -> dict[str, Any]:
    """{hits, misses, hit_rate} summed over the PRM actors in `info` (actor_stats' answer); zeros without any."""
    caches = [v["cache"] for n, v in info.items() if n.startswith("pcr-prm-") and (v or {}).get("cache")]
    hits, misses = sum(c["hits"] for c in caches), sum(c["misses"] for c in caches)
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / (hits + misses), 4) if hits + misses else 0.0}


def actor_stats(refs: Sequence[ActorRef | None], timeout_s: float = 30.0) -> dict[str, Any]:
    """info() of every remote actor behind these refs (calls, seconds), by name; asked of all at once, so the
    replicas lost with a node cost one wait of at most `timeout_s` in all, each an error entry."""
    out: dict[str, Any] = {}
    asked: dict[str, Any] = {}
    for ref in refs:
        if ref is None or ref.local_cfg is not None:
            continue
        for n in ref.names:
            try:
                asked[n] = ray.get_actor(n, namespace=ref.namespace).info.remote()
            except Exception as exc:
                out[n] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    deadline = time.monotonic() + timeout_s
    for n, obj in asked.items():
        try:
            out[n] = ray.get(obj, timeout=max(0.0, deadline - time.monotonic()))
        except Exception as exc:
            out[n] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    return dict(sorted(out.items()))
