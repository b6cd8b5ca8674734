"""Pydantic request/response models of the scoring service (they make its OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

MAX_ID_CHARS = 128
MAX_PROBLEM_CHARS = 20_000
MAX_CANDIDATES = 256

_TRACE_DOC = ("A trace object {givens, steps, answer} (`pcr-ray schema` prints its JSON Schema). Its inner "
              "shape is the verifier's business: a malformed trace is a verdict with ok=false, not an error.")
_EXAMPLE_TRACE: dict[str, Any] = {
    "givens": [{"name": "v0", "value": 0, "unit": "m/s"}, {"name": "a", "value": 2, "unit": "m/s^2"},
               {"name": "t", "value": 5, "unit": "s"}],
    "steps": [{"op": "mul", "args": {"x": "a", "y": "t"}, "out": {"name": "at", "unit": "m/s"}},
              {"op": "mul", "args": {"x": "at", "y": "t"}, "out": {"name": "at2", "unit": "m"}},
              {"op": "mul", "args": {"x": "at2", "y": 0.5}, "out": {"name": "d", "unit": "m"}, "value": 25}],
    "answer": [{"name": "d", "unit": "m"}],
}

RequestId = Annotated[str | None, Field(default=None, max_length=MAX_ID_CHARS,
                                        description="client's id, echoed back in the response")]
ProblemText = Annotated[str, Field(min_length=1, max_length=MAX_PROBLEM_CHARS,
                                   description="the problem text")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerifyRequest(_Strict):
    """POST /v1/verify body."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"trace": _EXAMPLE_TRACE}]})

    trace: dict[str, Any] = Field(description=_TRACE_DOC)


class DiagnosticModel(BaseModel):
    """Why the verifier rejected something."""

    step: int | None = Field(description="step index; null for givens / answer / the whole trace")
    stage: str = Field(description="syntax | units | coherence")
    code: str = Field(description="diagnostic code (see PRIMITIVES.md)")
    message: str


class StepResultModel(BaseModel):
    """An accepted step with its recomputed value in its declared unit."""

    index: int
    op: str
    name: str
    value: float | None = Field(description="null only if the value overflows a finite JSON number")
    unit: str
    dimension: str
    call: str


class AnswerModel(BaseModel):
    """An answer variable's value in the requested unit."""

    name: str
    value: float | None = Field(description="null only if the value overflows a finite JSON number")
    unit: str
    dimension: str


class VerdictModel(BaseModel):
    """The verifier's verdict: `pcr_ray.core.verifier.verify(trace).to_dict()`, as `pcr-ray verify TRACE json=true`."""

    ok: bool
    n_steps: int
    steps: list[StepResultModel]
    answer: list[AnswerModel]
    diagnostics: list[DiagnosticModel]


class TraceScoreRequest(_Strict):
    """POST /v1/score, whole-trace form: verify every step, PRM-score the accepted ones."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"problem": "A car starts from rest and accelerates at 2 m/s^2 for 5 s. How far does it go?",
         "trace": _EXAMPLE_TRACE}]})

    problem: ProblemText
    trace: dict[str, Any] = Field(description=_TRACE_DOC)
    id: RequestId = None


class CandidatesScoreRequest(_Strict):
    """POST /v1/score, search form: a verified prefix and candidate next steps, each checked and scored."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"problem": "A car starts from rest and accelerates at 2 m/s^2 for 5 s. How far does it go?",
         "prefix": {"givens": _EXAMPLE_TRACE["givens"], "steps": _EXAMPLE_TRACE["steps"][:1]},
         "candidates": [_EXAMPLE_TRACE["steps"][1],
                        {"op": "add", "args": {"x": "at", "y": "t"}, "out": {"name": "bad", "unit": "m"}}]}]})

    problem: ProblemText
    prefix: dict[str, Any] = Field(description="givens and steps so far ({givens, steps}; answer ignored)")
    candidates: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_CANDIDATES,
                                             description="candidate next steps ({op, args, out[, value]})")
    id: RequestId = None


def _score_kind(body: Any) -> str:
    if isinstance(body, dict):
        return "candidates" if ("prefix" in body or "candidates" in body) and "trace" not in body else "trace"
    if isinstance(body, CandidatesScoreRequest):
        return "candidates"
    return "trace"


ScoreRequest = Annotated[
    Annotated[TraceScoreRequest, Tag("trace")] | Annotated[CandidatesScoreRequest, Tag("candidates")],
    Discriminator(_score_kind),
]


class StepScore(BaseModel):
    """One step (trace form) or candidate (search form): the verifier's decision, then the PRM score."""

    index: int = Field(description="step index in the trace, or candidate index")
    status: Literal["accepted", "rejected", "skipped"] = Field(
        description="accepted by the verifier (and scored), rejected (diagnostic), or skipped (after a "
                    "rejection, or when the prefix is rejected)")
    op: str | None = None
    name: str | None = None
    value: float | None = None
    unit: str | None = None
    dimension: str | None = None
    rendered: str | None = Field(default=None, description="the step as the PRM sees it (render_candidate: "
                                                           "computed quantities named canonically)")
    score: float | None = Field(default=None, description="PRM score in [0, 1]; only for accepted steps")
    diagnostic: DiagnosticModel | None = None


class ScoreResponse(BaseModel):
    """POST /v1/score answer."""

    id: str | None = None
    mode: Literal["trace", "candidates"]
    ok: bool = Field(description="trace form: the whole trace verifies; search form: the prefix verifies")
    verdict: VerdictModel = Field(description="verdict on the trace (trace form) or the prefix (search form)")
    steps: list[StepScore]
    aggregate: dict[str, float | None] = Field(
        description="min / mean / last / prod of the PRM scores of the accepted steps (null when none)")
    n_scored: int = Field(description="how many (context, step) pairs went to the PRM (deduplicated)")
    checkpoint: str | None = None


class HealthResponse(BaseModel):
    """GET /healthz answer."""

    status: Literal["ok"]
    prm: bool = Field(description="a PRM checkpoint is loaded (POST /v1/score works)")


class InfoResponse(BaseModel):
    """GET /v1/info answer: what scores and how."""

    service: str
    version: str
    prm_available: bool
    prm: dict[str, Any] = Field(description="PRMScorer.identity plus batching settings; empty without a PRM")
    message: str | None = None
    max_body_bytes: int
    limits: dict[str, int]


class ErrorResponse(BaseModel):
    """Every 4xx / 503 answer: one precise message, and per-field errors for validation failures."""

    detail: str
    errors: list[dict[str, Any]] = Field(default_factory=list)
