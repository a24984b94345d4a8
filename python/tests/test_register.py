"""Registration in compile-only mode: descriptors, info, cubin, PTX, variants, the caches,
asynchronous registration, and the errors with their messages."""

import concurrent.futures
import ctypes
import os

import pytest

import clcrt

from conftest import SCALE_SRC, ScaleArgs


def test_device_runtime_or_a_clear_error():
    """A device runtime where there is a GPU; where there is none, NoDeviceError that says what to do."""
    try:
        rt = clcrt.Runtime()
    except clcrt.NoDeviceError as e:
        assert "arch=" in e.message or "driver" in e.message, e.message
        return
    assert not rt.compile_only and rt.arch.startswith("sm_")
    rt.close()


def test_runtime_compile_only(rt90):
    assert rt90.arch == "sm_90a" and rt90.compile_only
    assert "compile-only" in repr(rt90)
    with clcrt.Runtime(arch="sm_100a", cache_dir="") as rt:
        assert rt.arch == "sm_100a"


def test_register_and_info(scale_kernel):
    i = scale_kernel.info
    assert i.name == "clcrt_steal_scale_tile"
    assert i.arch == "sm_90a" and i.sched == clcrt.Sched.STEAL
    assert i.block == (256, 1, 1) and i.cluster == (1, 1, 1)
    assert i.registers > 0 and i.stack_bytes >= 0 and i.static_smem >= 0
    assert i.from_cache == 0 and i.compile_ms > 0 and not i.has_clc
    assert i.param_bytes == ctypes.sizeof(ScaleArgs) == 24  # from the cubin: no device to ask
    assert scale_kernel.args is ScaleArgs and scale_kernel.args_type == "ScaleArgs"


def test_cubin_and_ptx(scale_kernel):
    cubin = scale_kernel.cubin
    assert cubin[:4] == b"\x7fELF" and len(cubin) > 1000
    ptx = scale_kernel.ptx
    assert ".entry clcrt_steal_scale_tile" in ptx and ".target sm_90a" in ptx


@pytest.mark.parametrize("sched", ["static", "fixed", clcrt.Sched.STEAL, 2])
def test_schedulers(rt90, sched):
    k = rt90.register(SCALE_SRC, "scale_tile", ScaleArgs, block=128, sched=sched)
    want = clcrt.Sched[sched.upper()] if isinstance(sched, str) else clcrt.Sched(sched)
    assert k.info.sched == want
    assert k.info.name == "clcrt_%s_scale_tile" % want.name.lower()


def test_clc_on_sm100():
    with clcrt.Runtime(arch="sm_100a", cache_dir="") as rt:
        k = rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=128)
        assert k.info.sched == clcrt.Sched.CLC and k.info.has_clc


def test_descriptor_fields(rt90):
    src = SCALE_SRC + """
struct St { float a; };
__device__ void pro(const ScaleArgs &a, St &s) { s.a = a.alpha; }
__device__ void tile2(const clcrt::Tile &t, const ScaleArgs &a, St &s) {
  long i = (long)t.linear * blockDim.x + threadIdx.x;
  if (i < a.n) a.x[i] *= s.a * SCALE2;
}
"""
    k = rt90.register(src, "tile2", ScaleArgs, block=(64, 2), cluster=(2, 1, 1), smem_bytes=4096, sched="steal",
                      grid="full", options=["-DSCALE2=2.0f"], state_type="St", prologue_fn="pro",
                      min_blocks_per_sm=2)
    i = k.info
    assert i.block == (64, 2, 1) and i.cluster == (2, 1, 1)
    assert i.dynamic_smem == 4096 and i.grid == clcrt.Grid.FULL


def test_args_by_name_without_checks(rt90):
    k = rt90.register(SCALE_SRC, "scale_tile", "ScaleArgs", block=128)
    assert k.args is None and k.args_type == "ScaleArgs"


def test_variants_and_prepare(scale_kernel):
    scale_kernel.prepare(clcrt.Use.TRACE | clcrt.Use.GRAPH)
    obs = scale_kernel.observed
    assert obs.info.name == scale_kernel.info.name
    assert obs.cubin != scale_kernel.cubin
    short = scale_kernel.variant(clcrt.USE_SHORT)
    assert short.info.registers <= scale_kernel.info.registers
    with pytest.raises(clcrt.InvalidError, match="not its variant"):
        short.run(1, ScaleArgs())


def test_memory_cache_hit(rt90, scale_kernel):
    again = rt90.register(SCALE_SRC, "scale_tile", ScaleArgs, block=256)
    assert again._h == scale_kernel._h  # the same kernel, found in memory
    # Each Kernel says how its own registration found it, though both hold one C handle.
    assert again.info.from_cache == 1 and scale_kernel.info.from_cache == 0
    s = rt90.cache_stats()
    assert s.mem_hits >= 1 and s.misses >= 1


def test_disk_cache_across_runtimes(tmp_path):
    d = str(tmp_path / "cache")
    with clcrt.Runtime(arch="sm_90a", cache_dir=d) as rt:
        assert rt.cache_dir == os.path.realpath(d)
        assert rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=96).info.from_cache == 0
    with clcrt.Runtime(arch="sm_90a", cache_dir=d) as rt:
        k = rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=96)
        assert k.info.from_cache == 2 and rt.cache_stats().disk_hits == 1
        assert k.cubin[:4] == b"\x7fELF"
    entries = clcrt.tool.cache_entries(d)
    assert entries["dir"] == os.path.realpath(d) and len(entries["entries"]) >= 1
    clcrt.tool.cache_clear(d)
    assert clcrt.tool.cache_entries(d)["entries"] == []


def test_cache_dir_off_and_default(rt90, cache_root):
    assert rt90.cache_dir is None
    with clcrt.Runtime(arch="sm_90a") as rt:  # $CLCRT_CACHE_DIR, set by conftest
        assert rt.cache_dir == os.path.realpath(cache_root)


def test_register_async(rt90):
    futs = [rt90.register_async(SCALE_SRC, "scale_tile", ScaleArgs, block=b) for b in (32, 64, 96)]
    ks = [f.result(timeout=300) for f in futs]
    assert [k.info.block[0] for k in ks] == [32, 64, 96]
    bad = rt90.register_async(SCALE_SRC + "garbage(", "scale_tile", "ScaleArgs")
    with pytest.raises(clcrt.CompileError):
        bad.result(timeout=300)
    assert isinstance(bad, concurrent.futures.Future)


# ---- errors --------------------------------------------------------------------------------------


def test_compile_error_has_the_users_line(rt90):
    src = "struct A { int x; };\n__device__ void t(const clcrt::Tile &, const A &a) {\n  undefined_thing(a.x);\n}\n"
    with pytest.raises(clcrt.CompileError) as ei:
        rt90.register(src, "t", "A")
    e = ei.value
    assert e.status == 2 and e.status_name == "CLCRT_E_COMPILE"
    assert "(3): error" in e.message and "undefined_thing" in e.message


def test_bad_arch_messages():
    with pytest.raises(clcrt.InvalidError) as ei:
        clcrt.Runtime(arch="hopper")
    assert "not an architecture" in ei.value.message
    with pytest.raises(clcrt.UnsupportedError) as ei:
        clcrt.Runtime(arch="sm_80")
    assert "sm_90 or newer" in ei.value.message


@pytest.mark.parametrize(
    "kw, text",
    [
        ({"block": 0}, "block"),
        ({"block": (1, 2, 3, 4)}, "block"),
        ({"sched": "fastest"}, "sched"),
        ({"grid": 7}, "grid"),
        ({"smem_bytes": -1}, "smem_bytes"),
        ({"cluster": (3, 3, 3)}, "cluster"),
        ({"smem_bytes": 400 * 1024}, "409600"),
    ],
)
def test_descriptor_errors(rt90, kw, text):
    with pytest.raises(clcrt.InvalidError) as ei:
        rt90.register(SCALE_SRC, "scale_tile", ScaleArgs, **kw)
    assert text in str(ei.value)


def test_register_argument_errors(rt90):
    with pytest.raises(clcrt.InvalidError, match="tile_fn"):
        rt90.register(SCALE_SRC, "not a name", ScaleArgs)
    with pytest.raises(clcrt.InvalidError, match="Args"):
        rt90.register(SCALE_SRC, "scale_tile")
    with pytest.raises(clcrt.InvalidError, match="clcrt.Args"):
        rt90.register(SCALE_SRC, "scale_tile", 42)


def test_strings_with_a_nul_are_refused(rt90):
    """C reads a string up to its first NUL: the rest of a source (with the Args checks appended
    to it) used to vanish without a word. Every string that goes to C is refused instead."""
    with pytest.raises(clcrt.InvalidError, match=r"source contains a NUL character \(at index 4\)"):
        rt90.register("int \0" + SCALE_SRC, "scale_tile", ScaleArgs, block=64)
    with pytest.raises(clcrt.InvalidError, match="source contains a NUL"):
        rt90.register(SCALE_SRC + "\0garbage(", "scale_tile", ScaleArgs, block=64)
    with pytest.raises(clcrt.InvalidError, match="args contains a NUL"):
        rt90.register(SCALE_SRC, "scale_tile", "ScaleArgs\0Other", block=64)
    with pytest.raises(clcrt.InvalidError, match="options contains a NUL"):
        rt90.register(SCALE_SRC, "scale_tile", ScaleArgs, block=64, options=["-DA=1\0-DB=2"])
    with pytest.raises(clcrt.InvalidError, match="arch contains a NUL"):
        clcrt.Runtime(arch="sm_90a\0junk", cache_dir="")
    with pytest.raises(clcrt.InvalidError, match="cache_dir contains a NUL"):
        clcrt.Runtime(arch="sm_90a", cache_dir=b"/tmp\0/x")


def test_messages_say_what_python_took(rt90, scale_kernel, tmp_path):
    """The library's messages name C's fields and constants (desc->tile_fn, opts.target_arch,
    CLCRT_SCHED_STEAL); from Python they name the keywords and values its caller wrote."""

    def reg(fn="scale_tile", args=ScaleArgs, **kw):
        return rt90.register(SCALE_SRC, fn, args, **kw)

    cases = [
        (lambda: reg(fn="scal_tile"), ['does not appear in the source: check tile_fn='], clcrt.InvalidError),
        (lambda: reg(args="Nope"), ['Args type "Nope" does not appear in the source: check args='], clcrt.InvalidError),
        (lambda: reg(sched="clc"), ['sched="clc" needs Cluster Launch Control', 'use sched="steal" or sched="auto"'],
         clcrt.UnsupportedError),
        (lambda: reg(sched="static", grid="full"), ['grid= applies to sched="steal" only'], clcrt.InvalidError),
        (lambda: reg(smem_bytes=400 * 1024), ["smem_bytes=409600: sm_90a allows"], clcrt.InvalidError),
        (lambda: reg(options=["-arch=sm_80"]), ['options[0] "-arch=sm_80"', "(set arch= instead)"], clcrt.InvalidError),
        (lambda: reg(state_type="St"), ["state_type= and prologue_fn= go together"], clcrt.InvalidError),
        (lambda: reg(min_blocks_per_sm=32), ["min_blocks_per_sm=32: with 128 threads"], clcrt.InvalidError),
        (lambda: scale_kernel.variant(16), ["not clcrt.Use.TRACE, clcrt.Use.GRAPH"], clcrt.InvalidError),
        (lambda: clcrt.Runtime(arch="hopper"), ['arch="hopper" is not an architecture'], clcrt.InvalidError),
        (lambda: clcrt.Runtime(arch="sm_90a", cuda_home=str(tmp_path)), ["(cuda_home=)", "pass cuda_home=None"],
         clcrt.InvalidError),
    ]
    for call, words, cls in cases:
        with pytest.raises(cls) as ei:
            call()
        msg = ei.value.message
        for w in words:
            assert w in msg, (w, msg)
        for c in ("desc->", "opts.", "opts->", "CLCRT_SCHED_", "CLCRT_GRID_", "CLCRT_USE_", "target_arch", "NULL"):
            assert c not in msg, (c, msg)


def test_compile_only_cannot_run(rt90, scale_kernel):
    with pytest.raises(clcrt.UnsupportedError) as ei:
        rt90.stream()
    assert "only compiles" in ei.value.message
    with pytest.raises(clcrt.UnsupportedError):
        scale_kernel.run(4, ScaleArgs(0, 0, 1.0))


def test_closed_runtime(scale_kernel, rt90):
    rt90.close()
    rt90.close()  # twice is a no-op
    with pytest.raises(clcrt.InvalidError, match="closed"):
        scale_kernel.info
    with pytest.raises(clcrt.InvalidError, match="closed"):
        scale_kernel.run(1, ScaleArgs())
    with pytest.raises(clcrt.InvalidError, match="closed"):
        rt90.register(SCALE_SRC, "scale_tile", ScaleArgs)


def test_tensor_map_needs_a_device(rt90):
    with pytest.raises(clcrt.UnsupportedError) as ei:
        rt90.tensor_map_2d(0x10000, 64, 64, dtype="bfloat16", rows=256, cols=128)
    assert "compile-only" in ei.value.message
    with pytest.raises(clcrt.InvalidError) as ei:
        rt90.tensor_map_2d(0x10008, 64, 64, dtype="bfloat16", rows=256, cols=128)
    assert "16-byte aligned" in ei.value.message
    with pytest.raises(clcrt.InvalidError, match="TMA maps"):
        rt90.tensor_map_2d(0x10000, 64, 64, dtype="int32", rows=256, cols=128)
    for promo in ("none", "64b", "128b", "256b", clcrt.L2Promotion.NONE):
        with pytest.raises(clcrt.UnsupportedError, match="compile-only"):
            rt90.tensor_map_2d(0x10000, 64, 64, dtype="bfloat16", rows=256, cols=128, l2_promotion=promo)
    with pytest.raises(clcrt.InvalidError, match="l2_promotion"):
        rt90.tensor_map_2d(0x10000, 64, 64, dtype="bfloat16", rows=256, cols=128, l2_promotion="512b")
