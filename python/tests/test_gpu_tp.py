"""GPU: the tensor-parallel benchmark's check mode (python/bench/tp_layer.py --check), one
process per GPU through torch.distributed and NCCL: every mode's output against the
torch.matmul version on every rank. One GPU always (NCCL's all-reduce of one rank: the whole
path); two when there are two."""

import os
import subprocess
import sys

import pytest

from conftest import REPO, gpu_skip_reason

REASON = gpu_skip_reason()
if REASON is None:
    import torch
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        REASON = "this torch has no NCCL"
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))

SCRIPT = REPO / "python" / "bench" / "tp_layer.py"


def check(world):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.run([sys.executable, str(SCRIPT), "--check", "--spawn", str(world)], env=env, capture_output=True,
                       text=True, timeout=900)
    out = p.stdout + p.stderr
    print(out)  # the table, in pytest's report of a failure (or with -s)
    assert p.returncode == 0, out
    assert "tp_layer: check ok (%d ranks" % world in p.stdout, out
    assert "NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1" in p.stdout
    for mode in ("torch.matmul", "clcrt serial", "clcrt concurrent", "on the rest", "clcrt yielding", "clcrt tiles"):
        assert mode in p.stdout, mode


def test_one_gpu():
    check(1)


def test_two_gpus():
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU here: the two-GPU run needs a machine with two")
    check(2)
