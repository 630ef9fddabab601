"""Trace loaders: Azure CSV and JSONL, good files and every kind of bad one."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpubalance.errors import UserInputError
from gpubalance.workload import load_azure_csv, load_jsonl, load_trace


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_azure_csv_relative_sorted_arrivals(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "t.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:05.5000000,30,3\n"
        "2023-11-16 18:17:03.5000000,10,1\n"
        "2023-11-16 18:17:04.0000000,20,2\n",
    )
    reqs = load_azure_csv(p)
    assert [r.arrival_s for r in reqs] == pytest.approx([0.0, 0.5, 2.0])
    assert [(r.input_tokens, r.output_tokens) for r in reqs] == [(10, 1), (20, 2), (30, 3)]


def test_azure_csv_numeric_timestamps_and_extra_columns(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "t.csv",
        "extra,TIMESTAMP,GeneratedTokens,ContextTokens\nx,100.0,5,7\ny,101.25,6,8\n",
    )
    reqs = load_trace(p)
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in reqs] == [
        (0.0, 7, 5),
        (1.25, 8, 6),
    ]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("", r"t\.csv:1: trace is empty"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"),
        ("TIMESTAMP,ContextTokens\n1,2\n", r"t\.csv:1: field 'GeneratedTokens': missing column"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n1,5,5\n2,-3,5\n",
            r"t\.csv:3: field 'ContextTokens': token count must be a non-negative integer",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n1,5,abc\n",
            r"t\.csv:2: field 'GeneratedTokens': not a number",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,5\n",
            r"t\.csv:2: field 'TIMESTAMP'",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n1,5\n", r"t\.csv:2: row has 2 fields"),
    ],
)
def test_azure_csv_bad_input_names_file_line_field(tmp_path: Path, body: str, match: str) -> None:
    p = write(tmp_path, "t.csv", body)
    with pytest.raises(UserInputError, match=match):
        load_azure_csv(p)


def test_missing_file() -> None:
    with pytest.raises(UserInputError, match="not found"):
        load_trace("/nonexistent/trace.csv")


def test_jsonl_good_and_defaults(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "t.jsonl",
        '{"id": "a", "arrival_s": 2.0, "input_tokens": 5, "output_tokens": 1, "tags": {"k": "v"}}\n'
        "\n"
        '{"input_tokens": 7, "output_tokens": 0}\n',
    )
    reqs = load_trace(p)
    assert [(r.id, r.arrival_s, r.input_tokens) for r in reqs] == [("3", 0.0, 7), ("a", 2.0, 5)]
    assert reqs[1].tags == {"k": "v"}


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("", "trace is empty"),
        ('{"input_tokens": 1, "output_tokens": 1}\n{oops\n', r"t\.jsonl:2: malformed JSON"),
        ('{"input_tokens": 1}\n', r"t\.jsonl:1: field 'output_tokens': missing field"),
        ('{"input_tokens": 1.5, "output_tokens": 1}\n', r":1: field 'input_tokens'"),
        ('{"input_tokens": 1, "output_tokens": 1, "arrival_s": -1}\n', "field 'arrival_s'"),
        ("[1, 2]\n", "must be a JSON object"),
        (
            '{"id": "x", "input_tokens": 1, "output_tokens": 1}\n'
            '{"id": "x", "input_tokens": 1, "output_tokens": 1}\n',
            r":2: field 'id': duplicate id",
        ),
    ],
)
def test_jsonl_bad_input(tmp_path: Path, body: str, match: str) -> None:
    p = write(tmp_path, "t.jsonl", body)
    with pytest.raises(UserInputError, match=match):
        load_jsonl(p)


def test_shared_trace_matches_its_documented_figures(shared_trace: Path) -> None:
    # ../shared/data/README.md: input 3..7,437, output 6..1,899, ~57 minutes. (It says 8,818
    # requests; the file holds 8,819 data rows, counted here independently with csv.)
    reqs = load_trace(shared_trace)
    with shared_trace.open(newline="") as f:
        rows = sum(1 for _ in csv.reader(f)) - 1
    assert len(reqs) == rows == 8819
    assert min(r.input_tokens for r in reqs) == 3
    assert max(r.input_tokens for r in reqs) == 7437
    assert min(r.output_tokens for r in reqs) == 6
    assert max(r.output_tokens for r in reqs) == 1899
    assert 50 * 60 < reqs[-1].arrival_s < 60 * 60
    assert reqs[0].arrival_s == 0.0
