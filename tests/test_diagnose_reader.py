"""Tracer file format, reader aggregation and bad-input handling (hand-computed values)."""

from __future__ import annotations

import numpy as np
import pytest

from gpubalance.diagnose.format import (
    CAT_COMPUTE,
    CAT_DATA,
    CAT_OTHER,
    CAT_SYNC,
    KIND_COLL,
    KIND_PHASE,
    KIND_STEP,
    KIND_WORK,
    RECORD_DTYPE,
    category_of,
    name_record,
    write_trace_file,
)
from gpubalance.diagnose.load import load_traces
from gpubalance.diagnose.reader import read_tracer_file, read_tracer_rank
from gpubalance.diagnose.tracer import PhaseTracer
from gpubalance.errors import UserInputError

MS = 1_000_000  # ns


def _header(rank: int, run_id: str = "r1", world: int = 2) -> dict[str, object]:
    return {
        "format": "gpubalance-trace",
        "version": 1,
        "run_id": run_id,
        "rank": rank,
        "world_size": world,
        "host": f"h{rank}",
        "pid": 1,
        "local_rank": rank,
        "start_unix_ns": 1_700_000_000 * 10**9,
    }


def _records(n_steps: int, extra_data_ms: int = 0) -> np.ndarray:
    # names: 1=data(cat data), 2=compute, 3=all_reduce(sync)
    rows = [
        name_record(1, "data", CAT_DATA),
        name_record(2, "compute", CAT_COMPUTE),
        name_record(3, "all_reduce", CAT_SYNC),
    ]
    t = 0
    for s in range(n_steps):
        d = (3 + extra_data_ms) * MS
        rows.append((s, 1, KIND_PHASE, 0, t, d, 0.0))  # before the step: depth 0
        t += d
        rows.append((s, 2, KIND_PHASE, 1, t, 5 * MS, 0.0))
        rows.append((s, 3, KIND_COLL, 1, t + 5 * MS, 2 * MS, 4096.0))
        rows.append((s, 3, KIND_COLL, 2, t + 5 * MS, 1 * MS, 4096.0))  # nested: not summed
        rows.append((s, 0, KIND_STEP, 0, t, 10 * MS, 0.0))
        rows.append((s, 0, KIND_WORK, 0, 0, 0, 100.0 + s))
        t += 10 * MS
    return np.array(rows, dtype=RECORD_DTYPE)


def test_name_record_round_trip_and_categories(tmp_path):
    p = write_trace_file(tmp_path / "rank00000.gpbt", _header(0), _records(2))
    tf = read_tracer_file(p)
    assert tf.names == {1: ("data", CAT_DATA), 2: ("compute", CAT_COMPUTE), 3: ("all_reduce", 2)}
    assert category_of("dataloader") == CAT_DATA
    assert category_of("backward") == CAT_COMPUTE
    assert category_of("nccl:all_reduce") == CAT_SYNC
    assert category_of("checkpoint") == CAT_OTHER


def test_reader_aggregates_top_level_phases(tmp_path):
    p = write_trace_file(tmp_path / "rank00000.gpbt", _header(0), _records(3))
    rt = read_tracer_rank(p)
    assert rt.steps.tolist() == [0, 1, 2]
    # wall = 10 ms step + 3 ms data before it; other = 13 - 3 - 5 - 2 = 3 ms
    np.testing.assert_allclose(rt.wall_s, [0.013] * 3)
    np.testing.assert_allclose(rt.cat_s[0], [0.003, 0.005, 0.002, 0.003])
    np.testing.assert_allclose(rt.work, [100.0, 101.0, 102.0])
    assert rt.collectives == {"all_reduce": pytest.approx(0.009)}  # 3 steps x (2 + 1) ms
    # the step's start moves back to the start of the data wait before it
    assert rt.start_s[1] == pytest.approx(1_700_000_000 + 0.013)


def test_truncated_file_keeps_complete_records(tmp_path):
    p = write_trace_file(tmp_path / "rank00000.gpbt", _header(0), _records(4))
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) - 40])  # cut the last record and 8 bytes of the one before
    rt = read_tracer_rank(p)
    assert any("truncated" in w and str(p) in w for w in rt.warnings)
    # the last step's STEP record survived (WORK record of step 3 and part of STEP were cut)
    assert rt.steps.tolist() == [0, 1, 2]


def test_bad_magic_and_bad_header_name_the_file(tmp_path):
    bad = tmp_path / "rank00001.gpbt"
    bad.write_bytes(b"NOTATRACE" * 4)
    with pytest.raises(UserInputError, match="bad magic") as ei:
        read_tracer_file(bad)
    assert ei.value.file == str(bad)
    hdr = tmp_path / "rank00002.gpbt"
    hdr.write_bytes(b"GPBTRACE" + (50).to_bytes(4, "little") + b"{not json")
    with pytest.raises(UserInputError, match="truncated"):
        read_tracer_file(hdr)


def test_load_skips_bad_files_mixed_runs_and_reports_missing_ranks(tmp_path):
    write_trace_file(tmp_path / "rank00000.gpbt", _header(0, world=4), _records(5))
    write_trace_file(tmp_path / "rank00001.gpbt", _header(1, world=4), _records(5))
    other = tmp_path / "old" / "rank00002.gpbt"
    other.parent.mkdir()
    write_trace_file(other, _header(2, run_id="older", world=4), _records(5))
    (tmp_path / "rank00003.gpbt").write_bytes(b"garbage")
    ts = load_traces([tmp_path, other])
    assert ts.ranks.tolist() == [0, 1]
    text = "\n".join(ts.problems)
    assert "rank00003.gpbt" in text and "bad magic" in text
    assert str(other) in text and "older" in text
    assert "missing rank(s) 2-3" in text


def test_load_nothing_usable_raises(tmp_path):
    (tmp_path / "rank00000.gpbt").write_bytes(b"garbage")
    with pytest.raises(UserInputError, match="no usable trace file"):
        load_traces(tmp_path)


def test_tracer_writes_readable_file_and_appends_on_resume(tmp_path):
    tr = PhaseTracer(tmp_path, rank=0, world_size=1, run_id="abc", background=False)
    assert not any(tmp_path.iterdir())  # nothing happens in the constructor
    with tr:
        for batch in tr.timed([1, 2, 3]):
            with tr.step(work=batch):
                with tr.phase("compute"):
                    pass
                with tr.collective("all_reduce", 8):
                    pass
    rt = read_tracer_rank(tmp_path / "rank00000.gpbt")
    assert rt.steps.tolist() == [0, 1, 2]
    assert rt.work.tolist() == [1.0, 2.0, 3.0]
    assert (rt.cat_s[:, CAT_DATA] > 0).all() and (rt.cat_s[:, CAT_SYNC] > 0).all()
    # resume: same run id appends, the step numbering continues
    with PhaseTracer(tmp_path, rank=0, world_size=1, run_id="abc") as tr2, tr2.step(work=7):
        pass
    rt2 = read_tracer_rank(tmp_path / "rank00000.gpbt")
    assert rt2.steps.tolist() == [0, 1, 2, 3]
    assert rt2.work[3] == 7.0
    # a different run refuses to mix into the same file
    with pytest.raises(UserInputError, match="belongs to run 'abc'"):
        PhaseTracer(tmp_path, rank=0, world_size=1, run_id="zzz").start()


def test_tracer_background_flush_writes_without_close(tmp_path):
    import time

    tr = PhaseTracer(tmp_path, rank=0, world_size=1, run_id="bg", flush_interval_s=0.05)
    tr.start()
    try:
        with tr.step():
            pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if read_tracer_file(tmp_path / "rank00000.gpbt").next_step == 1:
                break
            time.sleep(0.02)
        assert read_tracer_file(tmp_path / "rank00000.gpbt").next_step == 1
    finally:
        tr.close()


def test_unknown_category_is_user_error(tmp_path):
    tr = PhaseTracer(tmp_path, rank=0, world_size=1, run_id="x")
    with pytest.raises(UserInputError, match="unknown phase category"):
        tr.phase("fwd", category="gpu-ish")


def test_truncated_profiler_trace_is_named_and_skipped(tmp_path):
    write_trace_file(tmp_path / "rank00000.gpbt", _header(0, world=2), _records(3))
    bad = tmp_path / "trace_rank1.json"
    bad.write_text('{"traceEvents": [{"name": "ProfilerStep#1", "ph": "X", "ts": 1, "dur"')
    ts = load_traces(tmp_path)
    assert ts.ranks.tolist() == [0]
    assert any(str(bad) in p and "not valid JSON" in p for p in ts.problems)
    assert any("missing rank(s) 1" in p for p in ts.problems)


def test_kineto_without_steps_is_user_error(tmp_path):
    from gpubalance.diagnose.kineto import read_kineto_rank

    f = tmp_path / "rank3.json"
    f.write_text('{"traceEvents": [{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2}]}')
    with pytest.raises(UserInputError, match="ProfilerStep") as ei:
        read_kineto_rank(f)
    assert ei.value.file == str(f)


def test_no_record_lost_under_constant_background_flushing(tmp_path):
    n = 20000
    with PhaseTracer(tmp_path, rank=0, world_size=1, run_id="race", flush_interval_s=1e-4) as tr:
        for i in range(n):
            with tr.step(work=i), tr.phase("compute"):
                pass
    rt = read_tracer_rank(tmp_path / "rank00000.gpbt")
    assert rt.steps.size == n
    assert float(np.sum(rt.work)) == n * (n - 1) / 2
