"""One table over every reader of a user's file: each refuses each kind of hostile input with one line
of a DepgraphError that starts with the file's (shown) path; each accepts its valid base file."""

from __future__ import annotations

import json
import os

import pytest

import depgraph as dg
from depgraph._files import shown_path
from depgraph.errors import DepgraphError

BENCH = json.dumps({"request_rate": 2.0, "burstiness": 1.0, "max_concurrency": None, "num_prompts": 3,
                    "completed": 3, "mean_ttft_ms": 50.0, "input_lens": [100, 100, 100], "output_lens": [8, 8, 8],
                    "ttfts": [0.05, 0.05, 0.05], "itls": [[0.01] * 7] * 3, "errors": ["", "", ""]}, indent=1)
CALIBRATION = '[setup]\nmodel = "qwen3-32b"\n[values]\nprefill_mfu = 0.5\nhbm_efficiency = 0.8\n'
HISTOGRAM = "expert,tokens\n0,10\n1,20\n2,30\n3,40\n"
OPERATIONS = "op,prompt_tokens,batch,context_tokens,seconds\nprefill,100,,,0.01\ndecode,,4,1000,0.02\n"
TRACE = "arrival_s,prompt_tokens,output_tokens\n0.0,100,8\n0.5,200,16\n"
PROFILE = ("n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers,"
           + ",".join(f"time_stats.{op}.median" for op in ("input_layernorm", "attn_pre_proj", "attn_rope",
                                                             "attn_post_proj", "post_attention_layernorm",
                                                             "mlp_up_proj", "mlp_act", "mlp_down_proj", "add"))
           + "\n" + "32,8,4096,14336,128256,True,128,1," + ",".join(["0.01"] * 9) + "\n")
GRAPH_JSON = json.dumps({"directed": True, "multigraph": False, "graph": {},
                         "nodes": [{"id": "a", "kind": "prefill", "duration_s": 1.0},
                                   {"id": "b", "kind": "decode", "duration_s": 2.0}],
                         "links": [{"source": "a", "target": "b"}]}, indent=1)
HARDWARE_JSON = json.dumps({"links": {"slow-eth": {"bandwidth_gbps": 10.0, "latency_s": 1e-5,
                                                   "description": "a test link"}}}, indent=1)
HARDWARE_TOML = '[links.slow-eth]\nbandwidth_gbps = 10.0\nlatency_s = 1e-5\ndescription = "a test link"\n'
MODEL = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
                    "num_hidden_layers": 32, "vocab_size": 128256, "torch_dtype": "bfloat16",
                    "max_position_embeddings": 8192}, indent=1)
SCENARIO = ('name = "s"\n[grid]\nmodels = ["qwen3-32b"]\nprompt_tokens = [1024]\nlinks = ["ib-ndr"]\n'
            'mfus = [0.5]\ntimings = ["handoff"]\n[[workloads]]\nworkload = "single"\n')


def _bench(path):
    from depgraph.io.benchjson import read_bench_result
    return read_bench_result(path)


def _calibration(path):
    from depgraph.specs.calibration import read_calibration
    return read_calibration(path)


def _histogram(path):
    from depgraph.specs.routing import _read_histogram
    return _read_histogram(str(path), "expert_routing")


def _operations(path):
    from depgraph.serving.calibrate import read_operations
    return read_operations(path)


def _trace(path):
    from depgraph.serving.traces import read_trace
    return read_trace(path)


def _profile(path):  # the profile is the folder's mlp.csv: the table's file name goes on the folder
    from depgraph.specs.profile_fit import read_profile_dir
    return read_profile_dir(path.parent)


def _graph(path):
    return dg.read_graph(path)


def _hardware(path):
    from depgraph.specs.hardware import _overlay
    _overlay.cache_clear()
    return _overlay(str(path))


def _model(path):
    return dg.load_model(str(path))


def _scenario(path):
    return dg.load_scenario(path)


# reader, file name, valid text, kind ("json", "toml" or "csv"), the constant capping its size, a key to repeat
# (JSON/TOML), the module and constant bounding its rows (CSV), a numeric field (JSON/TOML: key; CSV: a cell)
READERS = {
    "bench": (_bench, "r.json", BENCH, "json", ("depgraph.io.benchjson", "MAX_BENCH_FILE_BYTES"), None),
    "calibration": (_calibration, "c.toml", CALIBRATION, "toml",
                    ("depgraph.specs.calibration", "MAX_CALIBRATION_BYTES"), None),
    "histogram": (_histogram, "h.csv", HISTOGRAM, "csv", ("depgraph.specs.routing", "MAX_ROUTING_FILE_BYTES"),
                  ("depgraph.specs.routing", "MAX_ROUTING_ROWS")),
    "operations": (_operations, "ops.csv", OPERATIONS, "csv",
                   ("depgraph.serving.calibrate", "MAX_OPERATION_FILE_BYTES"),
                   ("depgraph.serving.calibrate", "MAX_OPERATION_ROWS")),
    "trace": (_trace, "t.csv", TRACE, "csv", ("depgraph.serving.traces", "MAX_TRACE_READ_BYTES"),
              ("depgraph.serving.arrivals", "MAX_REQUESTS")),
    "profile": (_profile, "mlp.csv", PROFILE, "csv", ("depgraph.specs.profile_fit", "MAX_PROFILE_BYTES"),
                ("depgraph.specs.profile_fit", "MAX_PROFILE_ROWS")),
    "graph-json": (_graph, "g.json", GRAPH_JSON, "json", ("depgraph.io.graphfile", "MAX_GRAPH_FILE_BYTES"), None),
    "hardware-json": (_hardware, "hw.json", HARDWARE_JSON, "json",
                      ("depgraph.specs.hardware", "MAX_HARDWARE_FILE_BYTES"), None),
    "hardware-toml": (_hardware, "hw.toml", HARDWARE_TOML, "toml",
                      ("depgraph.specs.hardware", "MAX_HARDWARE_FILE_BYTES"), None),
    "model": (_model, "config.json", MODEL, "json", ("depgraph.specs.models", "MAX_CONFIG_FILE_BYTES"), None),
    "scenario": (_scenario, "s.toml", SCENARIO, "toml", ("depgraph.sweeps.scenario", "MAX_SCENARIO_FILE_BYTES"),
                 None),
}


def _number_edit(kind: str, text: str, literal: str) -> str | None:
    """``text`` with its first number replaced by ``literal`` (``None``: the format cannot spell it)."""
    import re

    if kind == "toml" and literal in ("NaN", "Infinity"):
        literal = literal.lower()[:3]
    if kind == "json" and literal in ("nan", "inf"):
        return None
    pattern = r"(?:(?<=[=:,] )|(?<=\[))-?\d+(\.\d+)?(e-?\d+)?" if kind != "csv" else r"(?<=,)\d+(\.\d+)?(?=\n|,)"
    return re.sub(pattern, literal, text, count=1)


def _repeat_key(kind: str, text: str) -> str | None:
    if kind == "json":
        return "{" + text.lstrip()[1:].split(",", 1)[0] + "," + text.lstrip()[1:]
    if kind == "toml":
        first = next(line for line in text.splitlines() if "=" in line)
        return text.replace(first, first + "\n" + first, 1)
    return None


def _cases():
    """(reader, rule) pairs: every rule that applies to the reader's format."""
    out = []
    for name, (_, _, _, kind, _, rows) in READERS.items():
        rules = ["nul", "not-utf8", "directory", "newline-name", "oversize", "nan", "inf", "1e999"]
        if kind in ("json", "toml"):
            rules.append("repeated-key")
        if kind == "csv":
            rules += ["long-field", "too-many-rows"]
        out += [(name, rule) for rule in rules]
    return out


def _place(tmp_path, name: str, file_name: str, *, folder: str = "case") -> "os.PathLike":
    base = tmp_path / folder
    if name == "profile":
        base = base / "gpu"
    base.mkdir(parents=True, exist_ok=True)
    return base / file_name


@pytest.mark.parametrize("name", list(READERS))
def test_the_valid_base_file_of_each_reader_is_read(tmp_path, name):
    reader, file_name, text, *_ = READERS[name]
    path = _place(tmp_path, name, file_name)
    path.write_text(text)
    assert reader(path) is not None


@pytest.mark.parametrize("name, rule", _cases())
def test_each_reader_refuses_each_hostile_input_with_one_line_naming_the_file(tmp_path, monkeypatch, name, rule):
    import importlib

    reader, file_name, text, kind, (cap_module, cap_name), rows = READERS[name]
    folder = "bad\nname\x1b" if rule == "newline-name" else "case"
    path = _place(tmp_path, name, file_name, folder=folder)
    data: bytes | None = text.encode()
    if rule == "nul":
        data = text.replace("\n", "\n\x00", 1).encode()
    elif rule == "not-utf8":
        data = text.replace("\n", "\n\xff", 1).encode("latin-1")
    elif rule == "directory":
        path.mkdir()
        data = None
    elif rule == "newline-name":
        data = text.replace("\n", "\n\x00", 1).encode()  # something to refuse, from a file so named
    elif rule == "oversize":
        monkeypatch.setattr(importlib.import_module(cap_module), cap_name, len(data) - 1)
    elif rule in ("nan", "inf", "1e999"):
        literal = {"nan": "NaN", "inf": "Infinity"}.get(rule, rule) if kind == "json" else rule
        edited = _number_edit(kind, text, literal)
        if edited is None:
            pytest.skip(f"JSON spells {rule} only as NaN/Infinity (another case)")
        assert edited != text
        data = edited.encode()
    elif rule == "repeated-key":
        data = _repeat_key(kind, text).encode()
    elif rule == "long-field":
        lines = text.splitlines()
        data = ("\n".join(lines[:1] + ['"' + "9" * 20_000 + '"' + lines[1][lines[1].index(","):]] + lines[2:])
                + "\n").encode()
    elif rule == "too-many-rows":
        module, constant = rows
        monkeypatch.setattr(importlib.import_module(module), constant, len(text.splitlines()) - 2)
    if data is not None:
        path.write_bytes(data)
    shown = shown_path(path.parent if name == "profile" and rule in ("newline-name",) else path)
    with pytest.raises(DepgraphError) as info:
        reader(path)
    message = str(info.value)
    assert len(message.splitlines()) == 1 and "\n" not in message, message
    if name == "model" and rule == "directory":  # no config.json in it: load_model's own words, naming it
        assert repr(str(path)) in message, message
    else:
        assert message.startswith(shown), message
    if rule == "newline-name":
        assert "\\n" in message and "\x1b" not in message


def test_a_long_detailed_bench_file_reads_in_numpy(tmp_path):
    """A per-request bad value is still named by its index, and the values are the ones the loop gave."""
    from depgraph.io.benchjson import read_bench_result

    n = 5000
    data = {"request_rate": 2.0, "num_prompts": n, "input_lens": [100] * n, "output_lens": [8] * n,
            "ttfts": [0.05] * n, "itls": [[0.01] * 7] * n, "errors": [""] * n, "start_times": [float(i) for i in range(n)]}
    f = tmp_path / "big.json"
    f.write_text(json.dumps(data))
    run = read_bench_result(f)
    assert len(run.requests) == n and run.requests.tpot_s.iloc[0] == pytest.approx(0.01)
    assert run.requests.sent_s.iloc[-1] == n - 1
    data["start_times"][17] = "58"
    f.write_text(json.dumps(data))
    with pytest.raises(dg.ConfigError, match=r"start_times\[17\]: expected a number from -1e\+12 to 1e\+12, got '58'$"):
        read_bench_result(f)
    data["start_times"][17] = 17.0
    data["request_rate"] = 1e-9
    data.pop("start_times")
    f.write_text(json.dumps(data))
    with pytest.raises(dg.ConfigError, match=r"big.json: request_rate: 1e-09 req/s spreads 5,000 requests"):
        read_bench_result(f)
