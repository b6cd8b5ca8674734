"""`python -m pcr_ray.pipeline.gpu_step SCRIPT [ARGS ...]`: run a repository script on a GPU node of the cluster.

A recipe's driver runs on the head, which has no GPU on the shipped clusters; a step that needs one (the
listwise recipe's search benchmark with `--gpus N`) runs here instead: a Ray task that reserves one GPU runs
`python SCRIPT ARGS` on that node, SCRIPT relative to the checkout that node imports pcr_ray from (the job's
working directory), and its output and exit status come back to the driver. Its paths (checkpoints, --out) must
be on storage both nodes see.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ray

from pcr_ray.pipeline.ray_runtime import init_ray


@ray.remote(num_gpus=1)
def run_on_gpu(script: str, args: list[str]) -> tuple[int, str, str]:
    """`python SCRIPT ARGS` on this (GPU) node: (exit status, node address, output)."""
    import pcr_ray

    root = Path(pcr_ray.__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / script), *args], cwd=root, capture_output=True, text=True)
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
