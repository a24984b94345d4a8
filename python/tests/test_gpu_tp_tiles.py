"""GPU: clcrt.tp.RowAllReduce against torch on random sequences, one process per GPU through
torch.distributed (1 GPU always; 2 and 4 where the machine has them).

Every rank draws the same sequence: a few buffers of random rows and columns, each cut into
fixed row ranges, then steps on random ranges with random K, random GEMM and comm streams (of
three), some enqueued back to back without a check between (the previous reduction of the same
rows still running), some checked: the range's output poisoned with NaN first, then compared
with every rank's bf16 partial (the GEMM's own output) summed in fp32 by NCCL: |out - ref| <=
2^-8 |ref| (one bf16 rounding of the same fp32 sum); and each partial against torch's fp32
product (|d - ref| <= 2^-7 |ref| + 1e-2: the GEMM's summation order). A hang fails through
the subprocess timeout. Then the refusals: buffers of different shapes on different ranks
(every rank raises) and a call inside graph capture, after which the object still works."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from conftest import gpu_skip_reason

REASON = gpu_skip_reason()
if REASON is None:
    import torch
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        REASON = "this torch has no NCCL"
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))

WORKER = textwrap.dedent(r'''
    import os, random, sys
    os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})
    import torch, torch.distributed as dist, torch.multiprocessing as mp
    import clcrt

    def run(rank, world, port, steps):
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world,
                                device_id=torch.device("cuda", rank))
        rng = random.Random(11)  # the same draws on every rank
        streams = [torch.cuda.Stream() for _ in range(3)]
        checked = wrong = 0
        for buf in range(3):
            rows, cols = 64 * rng.randint(1, 48), 8 * rng.randint(1, 700)
            cuts = sorted({64 * rng.randint(1, rows // 64) for _ in range(rng.randint(0, 3))} - {rows})
            ranges = list(zip([0] + cuts, cuts + [rows]))
            ar = clcrt.tp.RowAllReduce(rows, cols, ctas=rng.choice([1, 5, 32]))
            for step in range(steps):
                r0, r1 = rng.choice(ranges)
                k = 8 * rng.randint(1, 300)
                gs, cs = rng.choice(streams), rng.choice(streams)
                check = rng.random() < 0.6
                g = torch.Generator(device="cuda").manual_seed(100003 * step + 7 * buf + rank)
                cur = torch.cuda.current_stream()
                a = torch.randn(r1 - r0, k, device="cuda", generator=g).bfloat16()
                b = torch.randn(cols, k, device="cuda", generator=g).bfloat16()
                gs.wait_stream(cur)
                a.record_stream(gs), b.record_stream(gs)
                with torch.cuda.stream(gs):
                    if check:
                        ar.out[r0:r1].fill_(float("nan"))
                    ar.gemm(a, b, row0=r0, stream=gs, comm=cs)
                if not check:
                    continue
                cur.wait_stream(cs)
                part = ar.partial[r0:r1].float()
                mm = a.float() @ b.float().T
                n = int((~((part - mm).abs() <= mm.abs() * 2.0 ** -7 + 1e-2)).sum().item())
                ref = part.clone()
                dist.all_reduce(ref)
                got = ar.out[r0:r1].float()
                n += int((~((got - ref).abs() <= ref.abs() * 2.0 ** -8)).sum().item())
                checked += 1
                if n:
                    wrong += 1
                    print("rank %d: buffer %dx%d rows [%d, %d) k %d: %d elements wrong" % (rank, rows, cols, r0, r1,
                                                                                      k, n), flush=True)
            torch.cuda.synchronize()
            ar.close()
        # Refusals: buffers that differ between ranks (every rank raises), and graph capture.
        refused = 0
        try:
            clcrt.tp.RowAllReduce(128, 64 + 8 * rank).close()
        except clcrt.InvalidError as e:
            refused += world > 1 and "different buffers" in str(e)
        if world == 1:
            refused += 1
        ar = clcrt.tp.RowAllReduce(128, 64)
        g = torch.Generator(device="cuda").manual_seed(5)  # the same operands on every rank: out = world x partial
        a = torch.randn(128, 32, device="cuda", generator=g).bfloat16()
        b = torch.randn(64, 32, device="cuda", generator=g).bfloat16()
        s = torch.cuda.Stream()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=s):
                ar.gemm(a, b)
        except clcrt.InvalidError as e:
            refused += "not in a CUDA graph" in str(e)
        ar.gemm(a, b)  # still usable: the refusal enqueued nothing
        torch.cuda.synchronize()
        ok = torch.allclose(ar.out.float(), world * ar.partial.float(), rtol=2.0 ** -7, atol=0)
        ar.close()
        if refused != 2 or not ok:
            print("rank %d: refusals %d of 2, result after them %s" % (rank, refused, ok), flush=True)
            wrong += 1
        t = torch.tensor([checked, wrong], device="cuda")
        dist.all_reduce(t)
        if rank == 0:
            print("tp tiles: %d ranks, %d checked reductions, %d wrong" % (world, t[0].item(), t[1].item()), flush=True)
        dist.destroy_process_group()
        if t[1].item():
            sys.exit(1)

    if __name__ == "__main__":
        world, port, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
        mp.spawn(run, args=(world, port, steps), nprocs=world, join=True)
''')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("world", [1, 2, 4])
def test_random_sequences(world, tmp_path):
    if torch.cuda.device_count() < world:
        pytest.skip("%d GPU(s) here: this run needs %d" % (torch.cuda.device_count(), world))
    script = tmp_path / "tp_tiles_worker.py"
    script.write_text(WORKER)
    steps = int(os.environ.get("CLCRT_TP_STEPS", "40"))
    p = subprocess.run([sys.executable, str(script), str(world), str(free_port()), str(steps)], capture_output=True,
                       text=True, timeout=900)
    out = p.stdout + p.stderr
    print(out)
    assert p.returncode == 0, out
    assert "tp tiles: %d ranks" % world in p.stdout and " 0 wrong" in p.stdout, out
