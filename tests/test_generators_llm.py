"""LLM backends: the vLLM adapter's batch building and output handling (CPU), and the real llama.cpp model."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import pytest

import pcr_ray.generators.llamacpp  # noqa: F401  (sets OMP_WAIT_POLICY before llama_cpp loads)
from pcr_ray.core.trace import Given, step_json_schema
from pcr_ray.generators.base import ProposalRequest
from pcr_ray.generators.givens_llm import LLMGivensExtractor, parse_givens_output
from pcr_ray.generators.llm_common import build_call
from pcr_ray.generators.schema import givens_schema
from pcr_ray.generators.vllm import VLLMGenerator, build_vllm_batch, collect_texts

CAR = "A car accelerates from rest at 2 m/s^2 for 5 s. How far does it go?"
CAR_GIVENS = (Given("v0", 0, "m/s", "from rest"), Given("a", 2, "m/s^2", "acceleration"), Given("t", 5, "s", "time"))


@pytest.fixture(scope="module")
def smollm_template():
    """The chat template shipped in the SmolLM2 GGUF, rendered by llama-cpp-python's Jinja2 formatter."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from pcr_ray.generators.model_folder import smollm2_gguf

    meta = llama_cpp.Llama(model_path=str(smollm2_gguf()), vocab_only=True, verbose=False).metadata
    fmt = Jinja2ChatFormatter(template=meta["tokenizer.chat_template"], eos_token="<|im_end|>",
                              bos_token="<|im_start|>")
    return lambda messages: fmt(messages=messages).prompt


def test_vllm_batch_building_with_a_real_chat_template(smollm_template) -> None:
    reqs = [ProposalRequest("car", CAR, CAR_GIVENS, k=4, target_unit="m"),
            ProposalRequest("car", CAR, CAR_GIVENS, k=2, mode="python"),
            ProposalRequest("car", CAR, CAR_GIVENS, k=1, mode="givens")]
    batch = build_vllm_batch(reqs, smollm_template, temperature=0.7, top_p=0.95, max_tokens=256,
                             max_tokens_free=1024, base_seed=3, schema_level="ops", max_ops=48)
    assert len(batch) == 3
    step, py, giv = batch
    assert step.prompt.startswith("<|im_start|>system") and step.prompt.endswith("<|im_start|>assistant\n")
    assert CAR in step.prompt and "kin_displacement" in step.prompt
    assert step.sampling_kwargs() == {"n": 4, "temperature": 0.7, "top_p": 0.95, "max_tokens": 256,
                                      "seed": build_call(reqs[0], base_seed=3).seeds[0]}
    assert step.schema == build_call(reqs[0], base_seed=3, max_ops=48).schema
    assert py.schema is None and py.n == 2 and py.max_tokens == 1024
    assert giv.schema == givens_schema() and giv.max_tokens == 1024


def test_vllm_output_handling_and_missing_engine() -> None:
    batch = build_vllm_batch([ProposalRequest("car", CAR, CAR_GIVENS, k=2)], lambda m: "P", temperature=0.0,
                             top_p=1.0, max_tokens=8, max_tokens_free=8, base_seed=0, schema_level="ops", max_ops=8)
    # the shape of vLLM's RequestOutput: .outputs[i].text
    outs = [SimpleNamespace(outputs=[SimpleNamespace(text=' {"answer": [ {"name": "d", "unit": "m"} ] }'),
                                     SimpleNamespace(text="not json")])]
    assert collect_texts(outs, batch) == [['{"answer":[{"name":"d","unit":"m"}]}', "not json"]]
    with pytest.raises(RuntimeError, match="outputs for 1 prompts"):
        collect_texts([], batch)
    gen = VLLMGenerator("Qwen/Qwen2.5-Math-1.5B-Instruct", max_model_len=2048)
    assert gen.engine_kwargs["max_model_len"] == 2048 and gen.identity["model"].endswith("1.5B-Instruct")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="vLLM is not installed"):
            gen.engine()


def test_parse_givens_output_drops_bad_entries() -> None:
    raw = json.dumps({"givens": [{"name": "a", "value": 2, "unit": "m/s^2", "desc": "acc"},
                                 {"name": "a", "value": 3, "unit": "m", "desc": "dup"},
                                 {"name": "2bad", "value": 1, "unit": "m", "desc": ""},
                                 {"name": "t", "value": 5, "unit": "parsecs per fortnight!", "desc": ""},
                                 {"name": "t", "value": 5, "unit": "s", "desc": "time"}],
                      "target": {"unit": "m", "desc": "distance"}})
    givens, target, dropped = parse_givens_output(raw)
    assert [g.name for g in givens] == ["a", "t"] and dropped == 3
    assert target.unit == "m" and target.known
    assert parse_givens_output("{broken") == ((), parse_givens_output("{broken")[1], 0)


@pytest.mark.llm
@pytest.mark.slow
def test_llamacpp_outputs_are_schema_valid_json() -> None:
    pytest.importorskip("llama_cpp")
    from pcr_ray.generators.llamacpp import LlamaCppGenerator

    gen = LlamaCppGenerator(max_ops=6, max_tokens=96, max_tokens_free=256)
    reqs = [ProposalRequest("car", CAR, CAR_GIVENS, k=2, target_unit="m"),
            ProposalRequest("kettle", "A 2000 W kettle runs for 3 minutes. How much energy does it use in J?",
                            (Given("P", 2000, "W"), Given("t", 3, "minute")), k=1, target_unit="J", seed=1)]
    outs, usage = gen.propose_counted(reqs)
    assert [len(o) for o in outs] == [2, 1]
    # llama.cpp's usage per completion: the k=2 request's two completions each count its (same) prompt
    assert usage[0][0] > 0 and usage[0][0] % 2 == 0 and usage[1][0] > 0
    assert 0 < usage[0][1] <= 2 * 96 and 0 < usage[1][1] <= 96
    assert gen.stats.extra["prompt_tokens"] == usage[0][0] + usage[1][0]
    general = jsonschema.Draft202012Validator(step_json_schema())
    for req, cands in zip(reqs, outs, strict=True):
        narrow = jsonschema.Draft202012Validator(build_call(req, max_ops=6).schema)
        for c in cands:
            obj = json.loads(c)  # grammar-constrained: always JSON
            narrow.validate(obj)
            general.validate(obj)
    ex = LLMGivensExtractor(gen)
    raw = gen.propose([ProposalRequest("g", CAR, k=1, mode="givens")])[0][0]
    jsonschema.validate(json.loads(raw), givens_schema())
    res = ex.extract(CAR)
    assert all(isinstance(g, Given) for g in res.givens)
    assert gen.stats.calls == 3 and gen.stats.candidates == 5


@pytest.mark.llm
@pytest.mark.slow
def test_the_half_size_model_keeps_the_first_half_of_the_layers(tmp_path) -> None:
    """`tiny:smollm2-half` (generator=vllm_tiny_half, a model-size sweep's second point) is SmolLM2's folder cut to
    its first half of decoder layers: half the layers in its config and its weights, the rest of the model kept."""
    pytest.importorskip("gguf")
    from safetensors import safe_open

    from pcr_ray.generators.model_folder import ensure_tiny_model, truncate_layers

    full = ensure_tiny_model()
    half = truncate_layers(full, tmp_path / "half")
    n_full = json.loads((full / "config.json").read_text())["num_hidden_layers"]
    assert json.loads((half / "config.json").read_text())["num_hidden_layers"] == n_full // 2

    def layers(folder):
        with safe_open(str(folder / "model.safetensors"), "pt") as f:
            keys = list(f.keys())
        return {int(k.split(".layers.")[1].split(".")[0]) for k in keys if ".layers." in k}, {
            k for k in keys if ".layers." not in k}

    (full_layers, full_rest), (half_layers, half_rest) = layers(full), layers(half)
    assert half_layers == set(range(n_full // 2)) and full_layers == set(range(n_full))
    assert half_rest == full_rest  # embeddings, final norm (and head) kept
