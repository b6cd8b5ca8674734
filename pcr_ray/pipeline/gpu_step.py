"""`python -m pcr_ray.pipeline.gpu_step MODULE [ARGS ...]`: run `python -m MODULE ARGS` on a GPU node of the cluster.

A recipe's driver runs on the head, which has no GPU on the shipped clusters; a step that needs one (the
listwise recipe's search benchmark, pcr_ray.bench.search_methods, with `gpus=N`) runs here instead: a Ray task
that reserves one GPU runs `python -m MODULE ARGS` on that node with the pcr_ray it imports, and its output and
exit status come back to the driver. Its paths (checkpoints, --out) must be on storage both nodes see.
"""

from __future__ import annotations

import subprocess
import sys

import ray

from pcr_ray.pipeline.ray_runtime import init_ray


@ray.remote(num_gpus=1)
def run_on_gpu(module: str, args: list[str]) -> tuple[int, str, str]:
    """`python -m MODULE ARGS` on this (GPU) node: (exit status, node address, output)."""
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True)
    return proc.returncode, ray.util.get_node_ip_address(), proc.stdout + proc.stderr


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    init_ray()
    rc, node, out = ray.get(run_on_gpu.remote(argv[0], list(argv[1:])))
    print(out, end="")
    print(f"[gpu-step] {argv[0]} ran on {node}: exit {rc}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
