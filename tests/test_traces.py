"""depgraph.serving.traces: the public production traces, read as published.

The shipped samples (``depgraph/specs/data/traces/``) are real rows; every malformed or edge-case
row below is a test input written here, in ``tmp_path``, never shipped as data."""

from __future__ import annotations

import doctest
import json
import math
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import depgraph.serving.arrivals as dg_arrivals

import depgraph.serving.traces as traces
from depgraph.errors import ConfigError
from depgraph.serving.arrivals import MAX_ARRIVAL_S
from depgraph.serving.traces import (MAX_TRACE_READ_BYTES, MOONCAKE_BLOCK_TOKENS, TRACE_FORMATS, Trace, load_trace,
                                     parse_range)

DATA = Path(traces.__file__).resolve().parents[1] / "specs" / "data" / "traces"
AZURE_CONV = DATA / "azure_conv_300.csv"
AZURE_CODE = DATA / "azure_code_300.csv"
MOONCAKE = DATA / "mooncake_conversation_300.jsonl"
REASONS = ["outside_slice", "outside_window", "zero_prompt", "zero_output", "over_context"]

BURST_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
# test inputs written for these tests (no real BurstGPT rows could be obtained; see the data README)
BURST_ROWS = ["5,ChatGPT,472,18,490,Conversation log",
              "45,ChatGPT,1087,0,1087,Conversation log",
              "118,GPT-4,417,276,693,API log",
              "118,ChatGPT,2000,300,2300,API log",
              "130.5,GPT-4,12,7,19,Conversation log"]


def write(tmp_path: Path, name: str, lines: list[str], end: str = "\n") -> Path:
    path = tmp_path / name
    path.write_bytes((end.join(lines) + end).encode())
    return path


def azure_ns(stamp: str) -> int:
    """Independent of the module: a naive Azure timestamp as integer nanoseconds."""
    day, clock = stamp.split(" ")
    hh, mm, ss = clock.split(":")
    whole, frac = ss.split(".")
    import datetime as dt
    return (dt.date.fromisoformat(day).toordinal() * 86400 + int(hh) * 3600 + int(mm) * 60 + int(whole)) * 10**9 \
        + int(frac.ljust(9, "0"))


def csv_rows(path: Path) -> list[list[str]]:
    return [line.split(",") for line in path.read_text().splitlines()[1:]]


def test_interface_constants():
    assert TRACE_FORMATS == ("depgraph", "azure", "mooncake", "burstgpt")
    assert MOONCAKE_BLOCK_TOKENS == 512
    assert MAX_TRACE_READ_BYTES == 1024**3
    assert set(traces.__all__) >= {"TRACE_FORMATS", "MOONCAKE_BLOCK_TOKENS", "MAX_TRACE_READ_BYTES", "Trace",
                                   "parse_range", "load_trace"}


# ---- the shipped samples ---------------------------------------------------------------------------

@pytest.mark.parametrize("path, fmt, n", [(AZURE_CONV, "azure", 300), (AZURE_CODE, "azure", 300),
                                          (MOONCAKE, "mooncake", 300)])
@pytest.mark.parametrize("explicit", [False, True])
def test_shipped_files_read_detected_and_explicit(path, fmt, n, explicit):
    trace = load_trace(path, format=fmt if explicit else None)
    assert isinstance(trace, Trace)
    assert trace.format == fmt and trace.rows_read == n and len(trace.table) == n
    assert trace.dropped == dict.fromkeys(REASONS, 0) and list(trace.dropped) == REASONS
    assert trace.path == str(path)
    want = ["arrival_s", "prompt_tokens", "output_tokens"] + (["hash_ids"] if fmt == "mooncake" else [])
    assert list(trace.table.columns) == want
    assert trace.table["arrival_s"].dtype == np.float64
    assert trace.table["prompt_tokens"].dtype == np.int64 and trace.table["output_tokens"].dtype == np.int64
    assert trace.table["arrival_s"].iloc[0] == 0.0
    assert (np.diff(trace.table["arrival_s"]) >= 0).all()
    assert trace.hash_block_tokens == (512 if fmt == "mooncake" else None)


def test_shipped_samples_are_the_published_bytes():
    """Header kept, CRLF line ends as published, 300 data rows each."""
    for path in (AZURE_CONV, AZURE_CODE):
        raw = path.read_bytes()
        assert raw.startswith(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
        assert raw.count(b"\r\n") == 301 and raw.endswith(b"\r\n")
    assert MOONCAKE.read_bytes().count(b"\n") == 300
    readme = (DATA / "README.md").read_text()
    for name in ("azure_conv_300.csv", "azure_code_300.csv", "mooncake_conversation_300.jsonl"):
        assert name in readme
    for commit in ("b469a113cedca53ddc3bdea71a143dc4b7d8700c", "3b5a594133958449a1feaf1c9e0fc1b553e34a28",
                   "e92f533b6c85ea7f4164fb3d97d1aa2c3edacbc8"):
        assert commit in readme
    assert sorted(p.name for p in DATA.iterdir()) == ["README.md", "azure_code_300.csv", "azure_conv_300.csv",
                                                      "mooncake_conversation_300.jsonl"]


def test_azure_conv_first_rows_by_hand():
    # lines 2-4 of the file: 18:15:46.6805900,374,44 / 18:15:50.9951690,396,109 / 18:15:51.2224670,879,55
    table = load_trace(AZURE_CONV).table
    assert table["prompt_tokens"].tolist()[:3] == [374, 396, 879]
    assert table["output_tokens"].tolist()[:3] == [44, 109, 55]
    assert table["arrival_s"].iloc[1] == 4.314579  # 50.9951690 - 46.6805900, exactly (rounded once)
    assert table["arrival_s"].iloc[2] == 4.541877


def test_azure_code_every_row_is_the_exact_timestamp_difference():
    rows = csv_rows(AZURE_CODE)
    first = azure_ns(rows[0][0])
    want = [float(Fraction(azure_ns(r[0]) - first, 10**9)) for r in rows]
    table = load_trace(AZURE_CODE).table
    assert table["arrival_s"].tolist() == want
    assert table["arrival_s"].iloc[1] == 0.052  # 18:17:04.0319600 - 18:17:03.9799600
    assert table["arrival_s"].iloc[2] == 0.098189  # 18:17:04.0781490 - 18:17:03.9799600
    assert table["prompt_tokens"].tolist() == [int(r[1]) for r in rows]
    assert table["output_tokens"].tolist() == [int(r[2]) for r in rows]


def test_azure_keeps_sub_millisecond_precision_and_ignores_the_local_zone(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    path = write(tmp_path, "a.csv", ["TIMESTAMP,ContextTokens,GeneratedTokens",
                                     "2023-11-05 05:59:59.9999999,1,1",  # a DST change in New York that night
                                     "2023-11-05 06:00:00.0000001,1,1",
                                     "2023-11-05 07:00:00.0000000,1,1"], end="\r\n")
    times = load_trace(path).table["arrival_s"].tolist()
    assert times == [0.0, 2e-7, 3600.0000001]


def test_mooncake_rows_and_hash_ids_kept():
    lines = [json.loads(line) for line in MOONCAKE.read_text().splitlines()]
    trace = load_trace(MOONCAKE)
    table = trace.table
    assert table["prompt_tokens"].tolist() == [r["input_length"] for r in lines]
    assert table["output_tokens"].tolist() == [r["output_length"] for r in lines]
    assert table["arrival_s"].tolist() == [r["timestamp"] / 1000 for r in lines]
    assert table["hash_ids"].iloc[0] == tuple(range(14))  # line 1: 6758 tokens, 14 blocks
    assert table["hash_ids"].iloc[1][:2] == (0, 14)  # shares block 0 with line 1
    assert all(isinstance(h, tuple) and len(h) == math.ceil(p / 512)
               for h, p in zip(table["hash_ids"], table["prompt_tokens"]))
    assert table["arrival_s"].iloc[10] == 3.0  # line 11: timestamp 3000 ms


def test_depgraph_format(tmp_path):
    path = write(tmp_path, "d.csv", ["arrival_s,prompt_tokens,output_tokens", "10.5,100,20", "11,200,0", "12.25,300,30"])
    trace = load_trace(path)
    assert trace.format == "depgraph"
    assert trace.table["arrival_s"].tolist() == [10.5, 12.25]  # depgraph's own times: seconds from the run's start
    assert trace.dropped["zero_output"] == 1


def test_burstgpt_reads_and_counts_failed_requests(tmp_path):
    path = write(tmp_path, "b.csv", [BURST_HEADER] + BURST_ROWS)
    trace = load_trace(path)
    assert trace.format == "burstgpt" and trace.rows_read == 5
    assert trace.dropped == {"outside_slice": 0, "outside_window": 0, "zero_prompt": 0, "zero_output": 1,
                             "over_context": 0}
    assert trace.table["arrival_s"].tolist() == [0.0, 113.0, 113.0, 125.5]
    assert trace.table["prompt_tokens"].tolist() == [472, 417, 2000, 12]
    assert trace.table["output_tokens"].tolist() == [18, 276, 300, 7]


def test_burstgpt_with_session_columns(tmp_path):
    header = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type"
    path = write(tmp_path, "b3.csv", [header, "3,s1,1.5,ChatGPT,40,8,48,Conversation log",
                                      "7,s1,2.5,GPT-4,30,6,36,Conversation log"])
    trace = load_trace(path, format="burstgpt")
    assert trace.table["arrival_s"].tolist() == [0.0, 4.0]
    assert trace.table["prompt_tokens"].tolist() == [40, 30]
    assert trace.table["output_tokens"].tolist() == [8, 6]


# ---- malformed rows: one line naming the file and the line -----------------------------------------

AZ = "TIMESTAMP,ContextTokens,GeneratedTokens"
AZ1 = "2023-11-16 18:15:46.6805900,374,44"
MC = '{"timestamp": %s, "input_length": %s, "output_length": %s, "hash_ids": %s}'
MC1 = MC % (0, 600, 5, "[0, 1]")
DG = "arrival_s,prompt_tokens,output_tokens"
BAD_ROWS = [
    # (name, lines, line number, words in the message)
    ("azure bad time", [AZ, AZ1, "2023-11-16 25:00:00.0,1,1"], 3, "TIMESTAMP: expected"),
    ("azure not a date", [AZ, AZ1, "2023-02-30 10:00:00.0,1,1"], 3, "TIMESTAMP: expected"),
    ("azure negative count", [AZ, AZ1, "2023-11-16 18:15:47.0,-5,1"], 3, "ContextTokens: expected an integer"),
    ("azure non-integer count", [AZ, AZ1, "2023-11-16 18:15:47.0,5,1.5"], 3, "GeneratedTokens: expected an integer"),
    ("azure too many tokens", [AZ, "2023-11-16 18:15:47.0,10000001,1"], 2, "ContextTokens: expected an integer"),
    ("azure missing field", [AZ, AZ1, "2023-11-16 18:15:47.0,5"], 3, "fields: expected 3"),
    ("azure extra field", [AZ, "2023-11-16 18:15:47.0,5,1,9"], 2, "fields: expected 3"),
    ("azure backwards", [AZ, AZ1, "2023-11-16 18:15:46.6805899,1,1"], 3, "TIMESTAMP: expected times in order"),
    ("mooncake bad json", [MC1, '{"timestamp": 1, "input_length": 5'], 2, "expected a JSON object; got invalid JSON"),
    ("mooncake nan", [MC1, MC % ("NaN", 5, 5, "[0]")], 2, "invalid JSON"),
    ("mooncake not an object", [MC1, "[1, 2, 3]"], 2, "expected a JSON object; got a JSON list"),
    ("mooncake missing key", [MC1, '{"timestamp": 1, "input_length": 5, "hash_ids": [0]}'], 2, "output_length: expected the key"),
    ("mooncake negative count", [MC1, MC % (1, 5, -1, "[0]")], 2, "output_length: expected an integer"),
    ("mooncake float count", [MC1, MC % (1, 5.0, 1, "[0]")], 2, "input_length: expected an integer"),
    ("mooncake bad time", [MC1, MC % ('"1"', 5, 1, "[0]")], 2, "timestamp: expected an integer"),
    ("mooncake backwards", [MC % (10, 600, 5, "[0, 1]"), MC % (9, 5, 1, "[0]")], 2, "timestamp: expected times in order"),
    ("mooncake short hash_ids", [MC1, MC % (1, 513, 1, "[0]")], 2, "hash_ids: expected 2 ids"),
    ("mooncake long hash_ids", [MC1, MC % (1, 512, 1, "[0, 1]")], 2, "hash_ids: expected 1 ids"),
    ("mooncake hash_ids negative", [MC1, MC % (1, 5, 1, "[-1]")], 2, "hash_ids: expected a list of integers"),
    ("mooncake hash_ids not ints", [MC1, MC % (1, 5, 1, '["a"]')], 2, "hash_ids: expected a list of integers"),
    ("mooncake hash_ids not a list", [MC1, MC % (1, 5, 1, "7")], 2, "hash_ids: expected a list of integers"),
    ("burstgpt bad time", [BURST_HEADER, BURST_ROWS[0], "abc,ChatGPT,1,1,2,API log"], 3, "Timestamp: expected"),
    ("burstgpt inf time", [BURST_HEADER, "inf,ChatGPT,1,1,2,API log"], 2, "Timestamp: expected a finite number"),
    ("burstgpt negative count", [BURST_HEADER, BURST_ROWS[0], "6,ChatGPT,-1,1,0,API log"], 3, "Request tokens: expected"),
    ("burstgpt missing field", [BURST_HEADER, BURST_ROWS[0], "6,ChatGPT,1,1,API log"], 3, "fields: expected 6"),
    ("burstgpt backwards", [BURST_HEADER, BURST_ROWS[0], "4,ChatGPT,1,1,2,API log"], 3, "Timestamp: expected times in order"),
    ("depgraph bad time", [DG, "1,1,1", "x,1,1"], 3, "arrival_s: expected"),
    ("depgraph nan time", [DG, "nan,1,1"], 2, "arrival_s: expected a finite number"),
    ("depgraph negative time", [DG, "-1,1,1"], 2, "arrival_s: expected a finite number >= 0"),
    ("depgraph negative count", [DG, "1,-1,1"], 2, "prompt_tokens: expected an integer"),
    ("depgraph underscore count", [DG, "1,1_000,1"], 2, "prompt_tokens: expected an integer"),
    ("depgraph too many outputs", [DG, "1,1,1000001"], 2, "output_tokens: expected an integer from 0 to 1,000,000"),
    ("depgraph wrong field count", [DG, "1,1"], 2, "fields: expected 3"),
    ("depgraph backwards", [DG, "2,1,1", "1,1,1"], 3, "arrival_s: expected times in order"),
]


@pytest.mark.parametrize("name, lines, line, words", BAD_ROWS, ids=[row[0] for row in BAD_ROWS])
def test_malformed_rows_are_refused_by_line(tmp_path, name, lines, line, words):
    path = write(tmp_path, "bad.trace", lines)
    with pytest.raises(ConfigError) as info:
        load_trace(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: line {line}: "), message
    assert words in message, message


def test_a_malformed_row_is_refused_even_before_the_slice(tmp_path):
    path = write(tmp_path, "bad.csv", [DG, "1,-1,1", "2,1,1"])
    with pytest.raises(ConfigError, match=r"line 2: prompt_tokens"):
        load_trace(path, rows=(1, None))


# ---- selection, scaling, filters -------------------------------------------------------------------

def test_rows_slice_is_a_python_slice_and_stops_reading():
    full = load_trace(AZURE_CONV).table
    trace = load_trace(AZURE_CONV, rows=(10, 20))
    assert trace.rows_read == 20 and len(trace.table) == 10
    assert trace.dropped["outside_slice"] == 10
    assert trace.table["prompt_tokens"].tolist() == full["prompt_tokens"].iloc[10:20].tolist()
    expected = (full["arrival_s"].iloc[10:20] - full["arrival_s"].iloc[10]).tolist()
    assert trace.table["arrival_s"].tolist() == pytest.approx(expected, abs=1e-12)
    assert trace.table["arrival_s"].iloc[0] == 0.0
    assert load_trace(AZURE_CONV, rows=(0, 500)).rows_read == 300  # past the end: everything
    assert len(load_trace(AZURE_CONV, rows=(None, 5)).table) == 5
    tail = load_trace(AZURE_CONV, rows=(295, None))
    assert tail.rows_read == 300 and len(tail.table) == 5


def test_rows_slice_stops_before_a_later_malformed_row(tmp_path):
    path = write(tmp_path, "t.csv", [DG, "1,1,1", "2,2,2", "oops"])
    trace = load_trace(path, rows=(0, 2))
    assert trace.rows_read == 2 and len(trace.table) == 2


def test_window_is_relative_to_the_first_data_row_half_open():
    # mooncake: the first 10 rows at 0 ms, then rows at 3000 ms, ...
    full = load_trace(MOONCAKE)
    times = full.table["arrival_s"]
    trace = load_trace(MOONCAKE, window_s=(3.0, 6.0))
    inside = ((times >= 3.0) & (times < 6.0)).to_numpy()
    assert len(trace.table) == inside.sum() > 0
    assert trace.table["prompt_tokens"].tolist() == full.table["prompt_tokens"][inside].tolist()
    assert trace.table["arrival_s"].iloc[0] == 0.0
    assert trace.dropped["outside_window"] == (times < 3.0).sum() + 1  # one row past the end, then stop
    assert trace.rows_read == (times < 6.0).sum() + 1
    assert len(trace.table) + sum(trace.dropped.values()) == trace.rows_read


def test_window_stops_before_a_later_malformed_row(tmp_path):
    path = write(tmp_path, "t.csv", [DG, "100,1,1", "101,2,2", "150,3,3", "oops"])  # 150 - 100: the end, outside
    trace = load_trace(path, window_s=(None, 50))
    assert trace.rows_read == 3 and len(trace.table) == 2 and trace.dropped["outside_window"] == 1


def test_window_after_slice(tmp_path):
    path = write(tmp_path, "t.csv", [DG] + [f"{t},{t + 1},1" for t in range(10)])
    trace = load_trace(path, rows=(2, 8), window_s=(4, None))
    # window time is from the file's first row (t = 0), not the slice's
    assert trace.table["prompt_tokens"].tolist() == [5, 6, 7, 8]
    assert trace.dropped["outside_slice"] == 2 and trace.dropped["outside_window"] == 2
    assert trace.rows_read == 8


def test_speed_two_halves_every_time_exactly():
    one = load_trace(AZURE_CONV).table["arrival_s"].to_numpy()
    two = load_trace(AZURE_CONV, speed=2).table["arrival_s"].to_numpy()
    assert (two == one / 2).all() and two[-1] > 0
    assert load_trace(AZURE_CONV, speed=2).summary()["span_s"] == one[-1] / 2


def test_over_context_counted(tmp_path):
    path = write(tmp_path, "b.csv", [BURST_HEADER] + BURST_ROWS)
    trace = load_trace(path, max_context_tokens=1000)
    assert trace.dropped["over_context"] == 1 and trace.dropped["zero_output"] == 1  # 2000+300; 1087+0
    assert trace.table["prompt_tokens"].tolist() == [472, 417, 12]
    assert load_trace(path, max_context_tokens=693).table["prompt_tokens"].tolist() == [472, 417, 12]
    assert load_trace(path, max_context_tokens=692).table["prompt_tokens"].tolist() == [472, 12]


def test_zero_prompt_counted_and_a_published_clock_rebased_from_the_first_kept_row(tmp_path):
    path = write(tmp_path, "d.csv", [DG, "1,0,5", "3,4,5", "4,4,0", "6,4,5"])
    trace = load_trace(path)
    assert trace.dropped == {"outside_slice": 0, "outside_window": 0, "zero_prompt": 1, "zero_output": 1,
                             "over_context": 0}
    assert trace.table["arrival_s"].tolist() == [3.0, 6.0]  # depgraph's format: kept as written
    burst = write(tmp_path, "b.csv", [BURST_HEADER, "1,ChatGPT,0,5,5,Conversation log", "3,ChatGPT,4,5,9,Conversation log",
                                      "6,ChatGPT,4,5,9,Conversation log"])
    assert load_trace(burst).table["arrival_s"].tolist() == [0.0, 3.0]  # a published clock: from the first kept row


def test_summary():
    trace = load_trace(MOONCAKE, rows=(0, 100), window_s=(0, 30), speed=4)
    summary = trace.summary()
    assert list(summary) == ["format", "path", "rows_read", "kept", "dropped", "speed", "slice", "window_s", "span_s"]
    assert json.loads(json.dumps(summary)) == summary
    assert summary["format"] == "mooncake" and summary["path"] == str(MOONCAKE)
    assert summary["kept"] == len(trace.table) and summary["rows_read"] == trace.rows_read
    assert summary["slice"] == [0, 100] and summary["window_s"] == [0.0, 30.0] and summary["speed"] == 4.0
    assert summary["span_s"] == trace.table["arrival_s"].iloc[-1]
    assert list(summary["dropped"]) == REASONS
    assert load_trace(AZURE_CODE).summary()["slice"] is None


def test_deterministic():
    a, b = load_trace(MOONCAKE, rows=(5, 200)), load_trace(MOONCAKE, rows=(5, 200))
    pd.testing.assert_frame_equal(a.table, b.table)
    assert a.summary() == b.summary()


# ---- refusals of the whole file and of the arguments -----------------------------------------------

def test_byte_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_TRACE_READ_BYTES", 200)
    with pytest.raises(ConfigError, match=r"the trace file is 11,187 bytes; at most 200 bytes are read.*MAX_TRACE_READ_BYTES") as info:
        load_trace(AZURE_CONV)
    assert str(info.value).startswith(f"{AZURE_CONV}: line ")
    assert len(load_trace(AZURE_CONV, rows=(0, 3)).table) == 3  # a read that stops early stays under the cap


def test_wrong_explicit_format():
    with pytest.raises(ConfigError) as info:
        load_trace(AZURE_CONV, format="mooncake")
    message = str(info.value)
    assert message.startswith(f"{AZURE_CONV}: line 1: format: expected a mooncake trace")
    assert "azure" in message and "\n" not in message
    with pytest.raises(ConfigError, match="expected a burstgpt trace.*got a mooncake trace"):
        load_trace(MOONCAKE, format="burstgpt")
    with pytest.raises(ConfigError, match="format: expected one of depgraph, azure, mooncake, burstgpt"):
        load_trace(MOONCAKE, format="sharegpt")


@pytest.mark.parametrize("first", ["time,prompt,output", '{"ts": 1}', "", "TIMESTAMP,ContextTokens"])
def test_unknown_header(tmp_path, first):
    path = write(tmp_path, "u.csv", [first, "1,2,3"])
    with pytest.raises(ConfigError) as info:
        load_trace(path)
    message = str(info.value)
    assert message.startswith(f"{path}: line 1: ") and "\n" not in message
    for name in TRACE_FORMATS:
        assert f"{name} (" in message


def test_mooncake_first_line_refusals(tmp_path):
    keyless = write(tmp_path, "k.jsonl", ['{"timestamp": 0, "input_length": 5, "hash_ids": [0]}'])
    with pytest.raises(ConfigError, match=r"line 1: output_length: expected the key"):
        load_trace(keyless, format="mooncake")
    broken = write(tmp_path, "b.jsonl", ['{"timestamp": 0, "input_length"'])
    with pytest.raises(ConfigError, match=r"line 1: expected a JSON object; got invalid JSON"):
        load_trace(broken)
    twice = write(tmp_path, "t.jsonl", [MC1, '{"timestamp": 1, "timestamp": 2, "input_length": 5, '
                                              '"output_length": 1, "hash_ids": [0]}'])
    with pytest.raises(ConfigError, match=r"line 2: .*appears twice"):
        load_trace(twice)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    with pytest.raises(ConfigError, match="line 1: expected a trace header.*got an empty file"):
        load_trace(path)


def test_no_rows_left(tmp_path):
    path = write(tmp_path, "b.csv", [BURST_HEADER, "1,ChatGPT,5,0,5,API log", "2,ChatGPT,5,0,5,API log"])
    with pytest.raises(ConfigError) as info:
        load_trace(path)
    assert str(info.value) == (f"{path}: no requests left: 2 rows read, dropped: outside_slice 0, outside_window 0, "
                               "zero_prompt 0, zero_output 2, over_context 0")
    header_only = write(tmp_path, "h.csv", [AZ])
    with pytest.raises(ConfigError, match="no requests left: 0 rows read"):
        load_trace(header_only)
    with pytest.raises(ConfigError, match="no requests left: 300 rows read.*outside_window 300"):
        load_trace(AZURE_CONV, window_s=(1e6, None))


def test_too_many_requests(tmp_path, monkeypatch):
    monkeypatch.setattr(dg_arrivals, "MAX_REQUESTS", 4)  # the one knob, read where it lives
    path = write(tmp_path, "d.csv", [DG] + [f"{t},1,1" for t in range(6)])
    with pytest.raises(ConfigError, match=r"line 6: more than 4 requests kept.*--trace-slice or --trace-window"):
        load_trace(path)
    assert len(load_trace(path, rows=(0, 4)).table) == 4


def test_arrival_beyond_max_arrival_s(tmp_path):
    path = write(tmp_path, "d.csv", [DG, "0,1,1", f"{MAX_ARRIVAL_S * 2:.0f},1,1"])
    with pytest.raises(ConfigError, match=r"line 3: arrival_s: expected at most 1e\+07 s"):
        load_trace(path)
    assert load_trace(path, speed=2).table["arrival_s"].tolist() == [0.0, MAX_ARRIVAL_S]


def test_not_a_regular_file(tmp_path):
    with pytest.raises(ConfigError, match="expected the trace file as a regular file, got a directory"):
        load_trace(tmp_path)
    with pytest.raises(ConfigError, match="no such trace file"):
        load_trace(tmp_path / "missing.csv")
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(ConfigError, match="FIFO"):
            load_trace(fifo)


@pytest.mark.parametrize("kwargs, field", [
    ({"speed": 0}, "speed"), ({"speed": -1}, "speed"), ({"speed": 2e6}, "speed"), ({"speed": math.nan}, "speed"),
    ({"rows": (5, 5)}, "rows"), ({"rows": (-1, 5)}, "rows"), ({"rows": (0.5, 5)}, "rows"), ({"rows": (1, 2, 3)}, "rows"),
    ({"rows": "0:5"}, "rows"), ({"window_s": (3, 1)}, "window_s"), ({"window_s": (math.inf, None)}, "window_s"),
    ({"max_context_tokens": 0}, "max_context_tokens"), ({"format": "csv"}, "format"),
])
def test_bad_arguments(kwargs, field):
    with pytest.raises(ConfigError, match=f"^{field}: expected"):
        load_trace(AZURE_CONV, **kwargs)


@pytest.mark.parametrize("text, integer, want", [
    ("0:500", True, (0, 500)), (":500", True, (None, 500)), ("10:", True, (10, None)), (":", True, (None, None)),
    (" 3 : 7 ", True, (3, 7)), ("0:60.5", False, (0.0, 60.5)), ("1e2:", False, (100.0, None)),
    (":0.25", False, (None, 0.25)),
])
def test_parse_range_good(text, integer, want):
    got = parse_range(text, field="--trace-slice", integer=integer)
    assert got == want and [type(v) for v in got] == [type(v) for v in want]


@pytest.mark.parametrize("text, integer", [
    ("5", True), ("1:2:3", True), ("a:5", True), ("-1:5", True), ("1.5:3", True), ("5:5", True), ("7:3", True),
    ("", True), ("+1:3", True), ("1_0:20", True), ("nan:", False), (":inf", False), ("-0.5:1", False),
    ("2:1.5", False), ("1:1", False), (5, True), (None, False),
])
def test_parse_range_bad(text, integer):
    with pytest.raises(ConfigError) as info:
        parse_range(text, field="--trace-window", integer=integer)
    assert str(info.value).startswith("--trace-window: expected START:END")
    assert "\n" not in str(info.value)


def test_the_user_doc_example_runs(monkeypatch):
    """docs/traces.md's example, with its numbers, run as a doctest from the repository root."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    result = doctest.testfile(str(root / "docs" / "traces.md"), module_relative=False,
                              optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted == 4 and result.failed == 0


def test_azure_times_with_and_without_an_offset_are_not_mixed(tmp_path):
    path = write(tmp_path, "a.csv", ["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46.0+05:00,10,2",
                                     "2023-11-16 18:15:47.0,10,2"])
    with pytest.raises(ConfigError, match=r"line 3: TIMESTAMP: expected every time with a UTC offset, as the first"):
        load_trace(path)
    same = write(tmp_path, "b.csv", ["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46.0+05:00,10,2",
                                     "2023-11-16 14:15:47.0+01:00,10,2"])
    assert load_trace(same).table.arrival_s.tolist() == [0.0, 1.0]
