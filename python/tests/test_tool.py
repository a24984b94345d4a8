"""The bundled tool: inspect, the cache commands."""

import pytest

import clcrt


def test_inspect_kernel(scale_kernel):
    doc = scale_kernel.inspect()
    assert doc["schema"] == "clcrt-inspect-1"
    (f,) = doc["files"]
    assert f["arch"] == "sm_90a"
    (k,) = f["kernels"]
    assert k["name"] == scale_kernel.info.name
    assert k["registers"] == scale_kernel.info.registers
    assert k["sched"] == "steal"


def test_inspect_bytes_and_path(scale_kernel, tmp_path):
    assert clcrt.inspect(scale_kernel.cubin)["files"][0]["kernels"][0]["name"] == "clcrt_steal_scale_tile"
    p = tmp_path / "k.cubin"
    p.write_bytes(scale_kernel.cubin)
    assert clcrt.inspect(p)["files"][0]["kernels"][0]["sched"] == "steal"


def test_inspect_clc_on_sm100():
    from conftest import SCALE_SRC, ScaleArgs

    with clcrt.Runtime(arch="sm_100a", cache_dir="") as rt:
        k = rt.register(SCALE_SRC, "scale_tile", ScaleArgs, block=128)
        assert k.inspect()["files"][0]["kernels"][0]["clc"]["present"] is True


def test_inspect_garbage(tmp_path):
    p = tmp_path / "junk.cubin"
    p.write_bytes(b"not an elf file at all" * 10)
    with pytest.raises(clcrt.Error) as ei:
        clcrt.inspect(p)
    assert "junk.cubin" in ei.value.message


def test_tool_usage_error():
    with pytest.raises(clcrt.InvalidError) as ei:
        clcrt.tool.run(["inspect", "--no-such-flag"])
    assert ei.value.returncode == 2
