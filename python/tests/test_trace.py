"""Traces from records: made, read back, saved and loaded, summarised, drawn."""

import json

import pytest

import clcrt

RECS = [
    # start, end, tile, unit, cluster, run, sm, cta_rank, flags
    (100, 300, 0, 0, 0, 0, 0, 0, 0),
    (100, 200, 1, 1, 1, 0, 1, 0, 0),
    (250, 400, 2, 2, 1, 0, 1, 0, clcrt.trace.STOLEN),
    (1000, 1100, 0, 0, 0, 1, 0, 0, 0),
]


@pytest.fixture
def trace():
    with clcrt.Trace.from_records(RECS, dropped=5) as t:
        yield t


def test_records_round_trip(trace):
    assert len(trace) == 4 and trace.dropped == 5
    r = trace.records
    assert r[0] == clcrt.Record(100, 300, 0, 0, 0, 0, 0, 0, 0)  # sorted by start, then SM
    assert [(x.start_ns, x.sm) for x in r] == [(100, 0), (100, 1), (250, 1), (1000, 0)]
    assert r[2].flags == clcrt.trace.STOLEN


def test_records_from_dicts_and_records():
    t = clcrt.Trace.from_records([{"start_ns": 5, "end_ns": 9, "sm": 3}, clcrt.Record(1, 2, 0, 0, 0, 0, 0, 0, 0)])
    assert [(r.start_ns, r.sm) for r in t.records] == [(1, 0), (5, 3)]


def test_summary(trace):
    s = trace.summary()
    assert (s.tiles, s.steals, s.runs, s.dropped, s.num_sms) == (4, 1, 2, 5, 2)
    assert s.span_ns == 1000.0
    assert len(s.busy_fraction) == 2
    # SM 0 ran [100, 300) and [1000, 1100): 300 of 1000 ns; SM 1 [100, 200) and [250, 400): 250.
    assert s.busy_fraction == pytest.approx((0.3, 0.25))


def test_save_and_load(trace, tmp_path):
    p = tmp_path / "t.json"
    assert trace.save(p) == p
    doc = json.loads(p.read_text())
    assert "traceEvents" in doc
    back = clcrt.Trace.load(p)
    assert back.records == trace.records and back.dropped == trace.dropped


def test_draw(trace, tmp_path):
    png = trace.draw(tmp_path / "t.png", width=400, height=200)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = trace.draw(str(tmp_path / "t.svg"), run=1)
    assert open(svg).read().lstrip().startswith("<")
    with pytest.raises(clcrt.InvalidError, match="png or .svg"):
        trace.draw(tmp_path / "t.jpg")
    with pytest.raises(clcrt.InvalidError, match="run"):
        trace.draw(tmp_path / "t2.png", run=7)


def test_bad_records():
    with pytest.raises(clcrt.InvalidError) as ei:
        clcrt.Trace.from_records([(10, 5, 0, 0, 0, 0, 0, 0, 0)])
    assert "end" in ei.value.message or "before" in ei.value.message
    with pytest.raises(clcrt.InvalidError):
        clcrt.Trace.from_records([(1, 2, 0, 0, 0, 0, 5000, 0, 0)])
    with pytest.raises(clcrt.InvalidError, match="not a trace record"):
        clcrt.Trace.from_records([("a", "b")])


def test_load_errors(tmp_path):
    with pytest.raises(clcrt.FileError):
        clcrt.Trace.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", "ts": }')
    with pytest.raises(clcrt.CorruptError) as ei:
        clcrt.Trace.load(bad)
    assert "line 1" in ei.value.message


def test_closed_trace(trace):
    trace.close()
    with pytest.raises(clcrt.InvalidError, match="closed"):
        len(trace)
    with pytest.raises(TypeError):
        clcrt.Trace()


def test_empty_trace():
    t = clcrt.Trace.from_records([])
    assert len(t) == 0 and t.records == [] and t.summary().tiles == 0
