"""``gpubalance partition`` through the real CLI entry point (and one real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpubalance.cli.main import main


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_default_workload(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(["partition", "--ranks", "8", "--requests", "3000", "--json"], capsys)
    assert code == 0
    rows = json.loads(out)
    assert [r["policy"] for r in rows] == ["count", "lpt", "kk"]
    by = {r["policy"]: r for r in rows}
    for r in rows:
        assert r["ranks"] == 8
        assert r["makespan_over_lower_bound"] >= 1.0
        assert len(r["rank_costs_s"]) == 8
    assert by["kk"]["makespan_over_lower_bound"] <= 1.001
    assert by["kk"]["step_max_over_mean"] < by["count"]["step_max_over_mean"]


def test_trace_table_and_html(
    shared_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "p.html"
    code, out, _ = _cli(
        [
            "partition",
            str(shared_trace),
            "-k",
            "4",
            "--policy",
            "count,kk",
            "--batch-budget",
            "40s",
            "--html",
            str(html),
        ],
        capsys,
    )
    assert code == 0
    assert "kk" in out and "count" in out and "packing" in out
    assert html.read_text().startswith("<!DOCTYPE html>")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ("", "trace.csv:1: trace is empty"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "trace.csv: trace has a header but no"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n0,12,3\n1,-5,2\n",
            "trace.csv:3: field 'ContextTokens'",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n0,12,abc\n",
            "trace.csv:2: field 'GeneratedTokens'",
        ),
        ("TIMESTAMP,ContextTokens\n0,12\n", "trace.csv:1: field 'GeneratedTokens': missing column"),
    ],
)
def test_bad_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expect: str
) -> None:
    trace = _write(tmp_path, "trace.csv", content)
    html = tmp_path / "out.html"
    code, out, err = _cli(["partition", str(trace), "--json", "--html", str(html)], capsys)
    assert code == 2
    assert expect in err
    assert len(err.strip().splitlines()) == 1 and out == ""
    assert not html.exists()


def test_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _write(
        tmp_path, "t.jsonl", '{"input_tokens": 5000, "output_tokens": 10, "id": "big"}\n'
    )
    cases = [
        (["partition", "--ranks", "0"], "field 'ranks'"),
        (["partition", "-k", "3", "--global-batch", "8"], "multiple of ranks"),
        (
            ["partition", str(trace), "--batch-budget", "0.01"],
            "t.jsonl: field 'batch-budget': budget smaller than one item: request id big",
        ),
        (["partition", "--batch-budget", "lots"], "field 'batch-budget'"),
        (["partition", "--policy", "kkk"], "did you mean 'kk'"),
        (["partition", "--cost-profile", str(tmp_path / "none.yaml")], "none.yaml: file not found"),
    ]
    for args, expect in cases:
        code, _, err = _cli(args, capsys)
        assert code == 2, args
        assert expect in err, (args, err)
        assert len(err.strip().splitlines()) == 1


def test_cost_profile_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # decode-only cost on a JSONL trace: costs are the output tokens, worked by hand
    prof = _write(tmp_path, "cost.yaml", "decode_s_per_token: 1.0\n")
    lines = [f'{{"input_tokens": 1, "output_tokens": {t}}}' for t in (8, 7, 6, 5, 4)]
    trace = _write(tmp_path, "t.jsonl", "\n".join(lines) + "\n")
    code, out, _ = _cli(
        [
            "partition",
            str(trace),
            "-k",
            "2",
            "--global-batch",
            "2",
            "--policy",
            "kk,lpt",
            "--cost-profile",
            str(prof),
            "--json",
        ],
        capsys,
    )
    assert code == 0
    by = {r["policy"]: r for r in json.loads(out)}
    assert sorted(by["kk"]["rank_costs_s"]) == [14.0, 16.0]  # KK: {7,5,4} | {8,6}
    assert sorted(by["lpt"]["rank_costs_s"]) == [13.0, 17.0]
    assert by["kk"]["makespan_over_lower_bound"] == pytest.approx(16 / 15)
    bad = _write(tmp_path, "bad.yaml", "decode_s_per_token: -1\n")
    code, _, err = _cli(["partition", "--cost-profile", str(bad)], capsys)
    assert code == 2 and "bad.yaml:1: field 'decode_s_per_token'" in err


def test_real_subprocess_exit_code(tmp_path: Path) -> None:
    trace = _write(tmp_path, "e.csv", "")
    proc = subprocess.run(
        [sys.executable, "-m", "gpubalance.cli.main", "partition", str(trace)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "e.csv" in proc.stderr
