"""The engines a pair PRM checkpoint scores on, and the check that a runtime, device and precision fit together."""

from __future__ import annotations

RUNTIMES = ("torch", "onnx")  # a pair checkpoint's engine. torch: fp32 or bf16, CPU or GPU | onnx: ONNX Runtime, CPU


def check_runtime(runtime: str, *, device: str = "cpu", int8: bool = False, bf16: bool = False,
                  attention: str = "pair") -> None:
    """ValueError naming the setting to change when runtime, device, int8 and bf16 cannot work together.

    `attention` is the checkpoint's (prm.json). `runtime` chooses the engine of a pair checkpoint; a shared_context
    PRM always scores on torch (its contexts encoded once, pcr_ray.prm.context_cache), int8 quantized per token.
    """
    if runtime not in RUNTIMES:
        raise ValueError(f"prm.runtime must be one of {RUNTIMES}, got {runtime!r}")
    if int8 and bf16:
        raise ValueError("choose one of int8 and bf16 scoring, not both")
    if attention == "shared_context":
        return
    if runtime == "onnx":
        if device != "cpu":
            raise ValueError(f"prm.runtime=onnx scores on CPU; with prm.device={device} set prm.runtime=torch "
                             f"prm.int8=false (prm.bf16=true scores faster on a GPU)")
        if bf16:
            raise ValueError("bf16 scoring runs on torch: set prm.runtime=torch prm.int8=false prm.bf16=true")
    elif int8:
        raise ValueError("int8 scoring runs on ONNX Runtime: set prm.runtime=onnx (faster than torch's dynamic int8 "
                         "and closer to fp32, docs/prm.md)")
