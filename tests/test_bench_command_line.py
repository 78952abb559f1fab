"""The benchmarks' shared command line: integer size options and the JSON report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.command_line import bench_parser, emit


def test_sizes_become_dashed_integer_options_with_their_defaults():
    parser = bench_parser("First line.\nMore.", out=True, cal_rows=50_000, member_chunk=None)
    assert parser.description == "First line."
    args = parser.parse_args([])
    assert (args.cal_rows, args.member_chunk, args.out) == (50_000, None, None)
    args = parser.parse_args(["--cal-rows", "7", "--member-chunk", "2", "--out", "a/b.json"])
    assert (args.cal_rows, args.member_chunk, args.out) == (7, 2, Path("a/b.json"))
    with pytest.raises(SystemExit):
        parser.parse_args(["--cal-rows", "1.5"])
    with pytest.raises(SystemExit):  # no --out unless asked for
        bench_parser("Doc.").parse_args(["--out", "x"])


def test_report_is_printed_and_written_into_a_new_folder(tmp_path, capsys):
    report = {"b": 1, "a": [2.5, None]}
    out = tmp_path / "new" / "report.json"
    assert emit(report, out, sort_keys=True) is report
    printed = capsys.readouterr().out
    assert printed == json.dumps(report, indent=2, sort_keys=True) + "\n"
    assert out.read_text() == printed
    emit(report)  # without a file: printed only, keys in their order
    assert capsys.readouterr().out == json.dumps(report, indent=2) + "\n"
