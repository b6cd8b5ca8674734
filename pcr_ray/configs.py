"""Typed configs of every Hydra entry point, and the one way a config is composed and checked.

The YAML files in `conf/` state every default once; the dataclasses here state each key's type and
leave its value to the YAML (fields without defaults). `check(name, cfg)` merges a composed config into its
schema, so a misspelt or dead key (in an experiment file or a `+key=value` override) fails at once with its
name, and so does a value of the wrong type. Groups whose keys depend on a choice (a generator's `kind`, a data
set's sources, search options) are plain mappings here and are checked by the code that builds them
(`build_generator`, `load_dataset`, `SearchConfig`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

# Optional[...] rather than `X | None`: OmegaConf reads these annotations at runtime.
# ruff: noqa: UP045, UP007


class ConfigError(ValueError):
    """A composed config does not fit its entry point's schema; the message names the key."""


def short_dirname(name: str, limit: int = 96) -> str:
    """`name` as one folder name of at most `limit` characters: a longer one keeps its start and a hash of it.

    A sweep's job folder is named by its overrides (`hydra.job.override_dirname`); with many overrides that name
    passes the file system's 255-byte limit. `pcr-ray summarize` reads the overrides from `.hydra/`, not the name.
    """
    name = name.replace("/", "_")
    if len(name) <= limit:
        return name
    import hashlib

    return f"{name[:limit - 11]}..{hashlib.sha1(name.encode()).hexdigest()[:9]}"


def _register_resolvers() -> None:
    """`${pcr_ray.cache:}`, `${pcr_ray.data:}`, `${pcr_ray.runs:}` (the cache, data and run folders of
    pcr_ray.paths) and `${pcr_ray.dirname:...}` (short_dirname), in YAML."""
    from pcr_ray.paths import cache_dir, data_dir, runs_dir

    if not OmegaConf.has_resolver("pcr_ray.dirname"):
        OmegaConf.register_new_resolver("pcr_ray.dirname", lambda s: short_dirname(str(s)))
    if not OmegaConf.has_resolver("pcr_ray.cache"):
        OmegaConf.register_new_resolver("pcr_ray.cache", lambda: str(cache_dir()))
    if not OmegaConf.has_resolver("pcr_ray.data"):
        OmegaConf.register_new_resolver("pcr_ray.data", lambda: str(data_dir()))
    if not OmegaConf.has_resolver("pcr_ray.runs"):  # runs: $PCR_RAY_RUNS, else ./outputs; sweeps (`multirun`):
        OmegaConf.register_new_resolver(             # $PCR_RAY_RUNS/multirun, else ./multirun
            "pcr_ray.runs", lambda kind="outputs": str(runs_dir() if kind == "outputs" else (
                runs_dir() / kind if os.environ.get("PCR_RAY_RUNS") else runs_dir().parent / kind)))


_register_resolvers()


# ---------------------------------------------------------------------------------------------- shared groups

@dataclass
class RayConfig:
    address: Optional[str]
    num_cpus: Optional[int]
    log_to_driver: bool


@dataclass
class EvaluateRayConfig(RayConfig):
    num_gpus: Optional[float]
    namespace: Optional[str]
    env_vars: dict[str, Any]
    wait_for_nodes_s: float


@dataclass
class PRMConfig:
    backbone: str
    pooling: str
    dropout: float
    max_length: int
    kind: str
    checkpoint: Optional[str]
    device: str
    runtime: str
    int8: bool
    bf16: bool
    max_batch: int
    cache_size: int
    ensure: dict[str, Any]
    attention: str
    candidate_length: int
    family: str
    convention: Optional[str]


@dataclass
class DatasetConfig:
    name: str
    data_dir: Optional[str]
    limit: Optional[int]
    sources: list[Any]


# ---------------------------------------------------------------------------------------------- evaluate

@dataclass
class PipelineConfig:
    num_search_workers: int
    worker_num_cpus: float
    fuse_light_stages: bool
    task_num_cpus: float
    task_concurrency: int
    batch_size: int
    worker_tasks_in_flight: int
    givens: str
    worker_max_restarts: int
    worker_max_task_retries: int
    problem_attempts: int
    rounds: int
    max_errored_blocks: int
    resume: bool
    retry_errors: bool
    progress: bool
    report_max_problems: int
    faults: dict[str, Any]


@dataclass
class ActorConfig:
    replicas: int
    num_cpus: float
    num_gpus: float
    max_restarts: int
    max_task_retries: int
    max_concurrency: int
    torch_threads: Optional[int]
    start_timeout_s: float


@dataclass
class GeneratorActorConfig(ActorConfig):
    placement: str


@dataclass
class ActorsConfig:
    generator: GeneratorActorConfig
    prm: ActorConfig


@dataclass
class GradingConfig:
    mode: str


@dataclass
class ScalingSweepConfig:
    budgets: list[int]
    width: int
    methods: list[str]


@dataclass
class EvaluateConfig:
    dataset: DatasetConfig
    generator: dict[str, Any]
    prm: PRMConfig
    search: dict[str, Any]
    methods: list[str]
    method_generators: dict[str, str]
    method_overrides: dict[str, Any]
    generators: dict[str, Any]
    method_prms: dict[str, str]
    prms: dict[str, PRMConfig]
    generator_source_overrides: dict[str, Any]
    search_source_overrides: dict[str, Any]
    baselines: dict[str, Any]
    run_dir: Optional[str]
    ray: EvaluateRayConfig
    pipeline: PipelineConfig
    actors: ActorsConfig
    grading: GradingConfig
    scaling: ScalingSweepConfig


# ---------------------------------------------------------------------------------------------- solve

@dataclass
class GivensConfig:
    kind: str
    generator: dict[str, Any]
    reuse_generator: bool


@dataclass
class SolveConfig:
    generator: dict[str, Any]
    search: dict[str, Any]
    method: dict[str, Any]
    prm: PRMConfig
    givens: GivensConfig
    target_unit: Optional[str]
    show_candidates: bool
    enumerator_cap: int


# ---------------------------------------------------------------------------------------------- PRM commands

@dataclass
class MakePairsConfig:
    sources: list[Any]
    out_dir: Optional[str]
    seed: int
    csp_per_kind: int
    random_per_kind: int
    search_per_kind: int
    kinds: list[str]
    split_fractions: list[float]
    rel_tol: float
    max_steps: int
    num_blocks: int
    batch_size: int
    num_cpus_per_task: float
    concurrency: Optional[int]
    ray: RayConfig


@dataclass
class TrainLoopConfig:
    loss: str
    epochs: int
    batch_size: int
    lr: float
    head_lr: float
    weight_decay: float
    warmup_frac: float
    grad_clip: float
    freeze_embeddings: bool
    precision: str
    seed: int
    val_batch_size: int
    max_batches: int
    progress: bool
    log_every: int
    init_from: str
    group_window: int
    torch_threads: int


@dataclass
class ScalingConfig:
    num_workers: int
    use_gpu: bool
    cpus_per_worker: float


@dataclass
class TrainPRMConfig:
    prm: PRMConfig
    pairs_dir: Optional[str]
    kinds: Optional[list[str]]
    limit_train: int
    kind_weights: Optional[dict[str, float]]
    limit_val: int
    output: Optional[str]
    storage_path: Optional[str]
    run_name: Optional[str]
    resume: bool
    keep_checkpoints: int
    shuffle_buffer: int
    train: TrainLoopConfig
    scaling: ScalingConfig
    ray: RayConfig


@dataclass
class EvalPRMConfig:
    prm: PRMConfig
    pairs_dir: Optional[str]
    split: str
    kinds: Optional[list[str]]
    limit_per_kind: int
    use_ray: bool
    actors: int
    cpus_per_actor: float
    gpus_per_actor: Optional[float]
    batch_size: int
    out: Optional[str]
    ray: RayConfig


@dataclass
class MinePairsConfig:
    prm: PRMConfig
    sources: list[Any]
    pairs_dir: Optional[str]
    splits: list[str]
    limit_per_split: Any  # an int for every split, or {split: int}
    per_problem: int
    positions: str
    prefixes_per_problem: int
    cap: int
    generators: dict[str, Any]
    seed: int
    rel_tol: float
    split_fractions: list[float]
    use_ray: bool
    actors: int
    cpus_per_actor: float
    gpus_per_actor: Optional[float]
    batch_size: int
    ray: RayConfig


# ---------------------------------------------------------------------------------------------- serve, data

@dataclass
class ServeRayConfig:
    address: Optional[str]


@dataclass
class ServeConfig:
    prm: PRMConfig
    checkpoint: Optional[str]
    kind: str
    family: str
    convention: Optional[str]
    prm_enabled: bool
    replicas: int
    max_batch_size: int
    host: str
    api_key_env: str
    api_key_file: Optional[str]
    allow_unauthenticated: bool
    port: int
    max_body_bytes: int
    app_name: str
    route_prefix: str
    runtime: str
    cache_size: int
    int8: bool
    bf16: bool
    device: str
    scorer_max_batch: int
    scorer_max_length: Optional[int]
    prm_num_cpus: float
    prm_num_gpus: float
    ingress_num_cpus: float
    max_ongoing_requests: int
    torch_threads: int
    ray: ServeRayConfig


@dataclass
class DataBuildConfig:
    data_dir: Optional[str]
    out_dir: Optional[str]
    datasets: list[str]
    physics: dict[str, Any]
    gsm8k: dict[str, Any]
    extraction: dict[str, Any]
    stats_file: str


@dataclass
class SFTRecipeConfig:
    name: str
    base_model: str
    physics_problems: int
    physics_seed: int
    physics_mix: str
    gsm8k_train: int
    formats: list[str]
    epochs: float
    lr: float
    batch_size: int
    max_len: int
    warmup: int
    lora_r: int
    lora_alpha: int
    bf16: bool
    seed: int
    max_steps: int
    prompt: str


@dataclass
class SFTConfig:
    sft_recipe: SFTRecipeConfig
    output: Optional[str]
    data_dir: Optional[str]
    storage_path: Optional[str]
    run_name: Optional[str]
    scaling: ScalingConfig
    ray: RayConfig


SCHEMAS: dict[str, type] = {
    "evaluate": EvaluateConfig, "solve": SolveConfig, "make_pairs": MakePairsConfig, "train_prm": TrainPRMConfig,
    "eval_prm": EvalPRMConfig, "mine_pairs": MinePairsConfig, "serve": ServeConfig, "data": DataBuildConfig,
    "sft": SFTConfig,
}


def check(config_name: str, cfg: DictConfig | Mapping[str, Any]) -> DictConfig:
    """`cfg` merged into the schema of `config_name` (types checked, no unknown or missing key); ConfigError if not."""
    schema = SCHEMAS[config_name]
    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    body = OmegaConf.masked_copy(node, [k for k in node if k != "hydra"]) if "hydra" in node else node
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), body)
        missing = sorted(OmegaConf.missing_keys(merged))
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{config_name} config: {_describe(exc)}") from None
    if missing:
        raise ConfigError(f"{config_name} config: no value for {', '.join(missing)} (set it in conf/"
                          f"{config_name}.yaml or on the command line)")
    return merged


def _describe(exc: OmegaConfBaseException) -> str:
    key = getattr(exc, "full_key", None)
    msg = str(exc).splitlines()[0]
    if "not in struct" in msg or "Key '" in msg and "not in" in msg:
        return f"unknown key {key!r} (a misspelt or dead key; `--cfg job` shows the valid ones)"
    return f"{key!r}: {msg}" if key else msg


def compose(config_name: str, overrides: Sequence[str] = (), values: Mapping[str, Any] | None = None) -> DictConfig:
    """The config `config_name` (conf/<name>.yaml) with Hydra overrides, composed and checked.

    `values` (a nested mapping) is merged on top, for callers in Python; its keys must exist like any override's.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pcr_ray.paths import conf_dir

    if GlobalHydra.instance().is_initialized():  # inside a Hydra app (e.g. a sweep job)
        cfg = hydra_compose(config_name, overrides=list(overrides))
    else:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3", job_name=config_name):
            cfg = hydra_compose(config_name, overrides=list(overrides))
    if values:
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.create(_plain_mapping(values)))
        except OmegaConfBaseException as exc:
            raise ConfigError(f"{config_name} config: {_describe(exc)}") from None
    return check(config_name, cfg)


def _plain_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): (_plain_mapping(v) if isinstance(v, Mapping) else v) for k, v in values.items()}


def checked_dict(config_name: str, cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """`cfg` checked against its schema (see `check`), as plain dicts: what the entry-point functions work on."""
    return to_plain(check(config_name, cfg))


def to_plain(node: Any) -> Any:
    """A config node as plain dicts and lists (interpolations resolved); anything else as it is."""
    if OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return node
