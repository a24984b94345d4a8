"""clcrt.TaskGraph without a GPU: the decode MLP example's graphs (three nodes, "all" and "rows"
edges; or four, with "kslices") and a graph with "same" and "custom" edges compile for Hopper and
Blackwell through the Python face; bad nodes and edges are refused with a message before anything
compiles. tests/test_gpu_taskgraph.py runs graphs against torch; tests/gpu_taskgraph.c (C)
runs random graphs against node-by-node launches."""

import importlib.util

import pytest

import clcrt

from conftest import REPO


def example():
    spec = importlib.util.spec_from_file_location("decode_mlp", REPO / "python" / "examples" / "decode_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_decode_mlp_graph_compiles(arch):
    m = example()
    with clcrt.Runtime(arch=arch, cache_dir="") as rt:
        s = m.slices_for(2048, 8192, 132)
        assert s > 1 and (8192 // s) % 256 == 0 and 2048 // m.ROWS_D * s >= 132
        # The default: the last down tile of each column block sums the slices (three nodes).
        src3, nodes3, graph3, smem3 = m.source("regs")
        assert len(nodes3) == len(graph3) == 3 and len(m.edges(2048, 8192, s)) == 2
        g3 = clcrt.TaskGraph(src3, graph3, m.edges(2048, 8192, s), block=m.BLOCK, smem_bytes=smem3, rt=rt)
        assert "atom.global.inc.u32" in g3.kernel.ptx and "clcrt_tg::wait(c + l, %du)" % s not in g3.source
        g3.close()
        # A fourth node sums them: a KSLICES edge.
        src, nodes, graph_nodes, smem = m.source("regs", sum="node")
        assert src == m.SRC and len(graph_nodes) == 4
        g = clcrt.TaskGraph(src, graph_nodes, m.edges(2048, 8192, s, sum="node"), block=m.BLOCK, smem_bytes=smem,
                            rt=rt)
        i = g.kernel.info
        assert i.arch == arch and i.stack_bytes <= 64, (i.arch, i.stack_bytes)
        assert i.sched == (clcrt.Sched.STEAL if arch == "sm_90a" else clcrt.Sched.CLC)
        src = g.source
        assert "gate_up(lt, g.a1)" in src
        assert "clcrt_tg::wait(c + l, %du)" % s in src  # the K slices' reduction
        assert "ld.acquire.gpu" in g.kernel.ptx and "prefetch.global.L2" in g.kernel.ptx
        assert "gate_up_prefetch(lt, g.a1)" in src and "down_prefetch(lt, g.a2)" in src
        for s_, ns in ((m.SRC, nodes), (src3, nodes3)):  # the tile functions alone, as run_nodes launches them
            for fn, cls in ns:
                rt.register(s_, fn, cls, block=m.BLOCK, smem_bytes=m.SMEM)
        with pytest.raises(ValueError, match="sum"):
            m.source("regs", sum="atomic")
        g.close()
        g.close()
        with pytest.raises(clcrt.InvalidError, match="closed"):
            g.source


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_decode_mlp_bulk_ring_compiles(arch):
    """The projections' bulk-copy ring: armed by the prefetch functions in the graph, by the
    tiles themselves node by node; 2 CTAs of 256 threads still fit an SM (registers, shared
    memory); auto picks the ring for the 8B-class block only; bad settings are refused."""
    m = example()
    assert m.bulk_pays(4096, 14336 // 4) and not m.bulk_pays(2048, 8192 // 8) and not m.bulk_pays(4096, 3328)
    # gate/up tiles of 32 rows for the 1B-class block, 64 for the 8B-class, 16 for a small one
    assert [m.gu_sub_for(i, i // s, 132) for i, s in ((8192, 4), (14336, 2), (3584, 7))] == [2, 4, 1]
    assert m.slices_for(2048, 8192, 132) == 4 and m.slices_for(4096, 14336, 132) == 2
    with pytest.raises(ValueError, match="stages"):
        m.source("bulk", stages=9)
    with pytest.raises(ValueError, match="stream"):
        m.source("fast")
    with pytest.raises(ValueError, match="16, 32 or 64 rows"):
        m.source("bulk", gu_sub=3)
    with pytest.raises(ValueError, match="multiple"):
        m.source("bulk", gu_sub=4, gu_sps=126)
    # Tiles of 4 sub-tiles of the 8B-class block's K slices (448 sub-tiles): 112 tiles a slice of
    # the even split's mapping, which gives each exactly 4.
    src, nodes, graph_nodes, smem = m.source("bulk", gu_sub=4, gu_sps=448)
    assert "#define GU_TPS 112\n#define GU_SPS 448\n" in src and "GU_SUB" not in src
    assert smem == m.bulk_smem(2, 512) and 2 * smem <= 227 * 1024
    with clcrt.Runtime(arch=arch, cache_dir="") as rt:
        g = clcrt.TaskGraph(src, graph_nodes, m.edges(4096, 14336, 2, 64), block=m.BLOCK, smem_bytes=smem, rt=rt)
        i = g.kernel.info
        # Two CTAs an SM on the H100/H200 (sm_100a's CLC loop takes more; not measured there).
        assert i.stack_bytes <= 64 and (i.registers <= 128 or arch != "sm_90a"), (i.registers, i.stack_bytes)
        assert "gate_up_bulk_arm(lt, g.a1)" in g.source and "down_bulk_armed(lt, g.a2)" in g.source
        ptx = g.kernel.ptx
        assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
        assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx and "fence.proxy.async.shared::cta" in ptx
        for fn, cls in nodes:
            k = rt.register(src, fn, cls, block=m.BLOCK, smem_bytes=smem)
            assert k.info.registers <= 128 or arch != "sm_90a", (fn, k.info.registers)
        g.close()
        # The norm folded into the gate/up tiles: two nodes, one edge, and the weights' copies
        # marked for L2 to evict first.
        src, nodes, graph_nodes, smem = m.source("bulk", gu_sub=2, norm="fold", gu_sps=128)
        assert [n for n, _ in nodes] == ["gate_up_fold", "down_bulk"] and len(graph_nodes) == 2
        assert m.edges(2048, 8192, 4, 32, norm="fold") == [(0, 1, "rows", 64, 64)]
        assert len(m.edges(2048, 8192, 4, 32, sum="node", norm="fold")) == 2
        g = clcrt.TaskGraph(src, graph_nodes, m.edges(2048, 8192, 4, 32, norm="fold"), block=m.BLOCK,
                            smem_bytes=smem, rt=rt)
        i = g.kernel.info
        assert i.stack_bytes <= 64 and (i.registers <= 128 or arch != "sm_90a"), (i.registers, i.stack_bytes)
        assert "gate_up_bulk_arm(lt, g.a0)" in g.source and "gate_up_fold_armed(lt, g.a0)" in g.source
        assert "createpolicy.fractional.L2::evict_first" in g.kernel.ptx and ".L2::cache_hint" in g.kernel.ptx
        for fn, cls in nodes:
            k = rt.register(src, fn, cls, block=m.BLOCK, smem_bytes=smem)
            assert k.info.registers <= 128 or arch != "sm_90a", (fn, k.info.registers)
        g.close()
        # gu_sub="even", as DecodeMLP builds the 8B-class block on 132 SMs: each K slice's 448
        # sub-tiles of 16 rows over 132 tiles (3 or 4 each), the ROWS edge counting 132 a slice;
        # at 1B 66 tiles a slice; none for a slice of fewer sub-tiles than CTA slots.
        assert [m.gu_even(i, s, 132) for i, s in ((14336, 2), (8192, 4), (3584, 7))] == [132, 66, 0]
        src, nodes, graph_nodes, smem = m.source("bulk", norm="fold", gu_tps=132, gu_sps=448)
        assert "#define GU_TPS 132\n#define GU_SPS 448\n" in src
        with pytest.raises(ValueError, match="even split"):
            m.source("bulk", norm="fold", gu_tps=40, gu_sps=32)
        edges = m.edges(4096, 14336, 2, 16, norm="fold", per_slice=132)
        assert edges == [(0, 1, "rows", 128, 132)]
        g = clcrt.TaskGraph(src, graph_nodes, edges, block=m.BLOCK, smem_bytes=smem, rt=rt)
        i = g.kernel.info
        assert i.stack_bytes <= 64 and (i.registers <= 128 or arch != "sm_90a"), (i.registers, i.stack_bytes)
        g.close()
    with pytest.raises(ValueError, match="fold"):
        m.source("regs", norm="fold")


SRC = r"""
struct P { unsigned *x; };
__device__ uint2 two(unsigned tile, unsigned tiles, unsigned producer_tiles) { return make_uint2(2 * tile, 2 * tile + 2); }
__device__ void put(const clcrt::Tile &t, const P &a) { if (threadIdx.x == 0) a.x[t.linear] = 1; }
"""


class P(clcrt.Args):
    x: clcrt.ptr("u32")


def test_same_and_custom_edges():
    with clcrt.Runtime(arch="sm_90a", cache_dir="") as rt:
        g = clcrt.TaskGraph(SRC, [("put", P)] * 3, [(0, 1, "same"), (0, 2, "custom", "two"), (1, 2, "all")],
                            block=32, sched="static", rt=rt)
        assert g.kernel.info.sched == clcrt.Sched.STATIC
        assert "two(l, tc, tp)" in g.source


@pytest.mark.parametrize("nodes,edges,match", [
    ([], [], "at least one node"),
    ([("put", int)], [], "not a clcrt.Args class"),
    (["put"], [], "give \\(tile_fn, ArgsClass\\)"),
    ([("put", P)] * 2, [(0, 1)], "give \\(from, to, kind"),
    ([("put", P)] * 2, [(0, 1, "sideways")], "one of all, custom, kslices, rows, same"),
    ([("put", P)] * 2, [(0, 1, "rows", 2)], "a rows edge is \\(from, to, 'rows', a, b\\)"),
    ([("put", P)] * 2, [(0, 1, "kslices")], "'kslices', slices"),
    ([("put", P)] * 2, [(0, 1, "custom", 3)], "must be a str"),
    ([("put", P)] * 2, [(1, 0, "all")], "edge 0 goes from node 1 to node 0"),
    ([("put", P)] * 2, [(0, 1, "rows", 0, 1)], "needs a >= 1"),
    ([("put", P), ("nope", P)], [], "NVRTC|nope"),
])  # fmt: skip
def test_refusals(nodes, edges, match):
    with clcrt.Runtime(arch="sm_90a", cache_dir="") as rt:
        with pytest.raises(clcrt.Error, match=match):
            clcrt.TaskGraph(SRC, nodes, edges, block=32, rt=rt)


def test_run_refused_without_gpu():
    with clcrt.Runtime(arch="sm_90a", cache_dir="") as rt:
        g = clcrt.TaskGraph(SRC, [("put", P)] * 2, [(0, 1, "same")], block=32, rt=rt)
        with pytest.raises(clcrt.InvalidError, match="2 nodes, but 1 tile counts"):
            g.run([1], [P(0)])
        with pytest.raises(clcrt.InvalidError, match="args\\[1\\] is int"):
            g.run([1, 1], [P(0), 5])
