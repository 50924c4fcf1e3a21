"""The command line: outputs, JSON contracts, and one-line errors."""

import json
import subprocess
import sys

import pytest

import depgraph as dg

from depgraph.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_lists_the_catalog(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0
    for name in ("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "qwen3-32b"):
        assert name in out
    for family in ("Jamba", "Falcon-H1", "Granite-4.0-H", "Bamba", "gpt_oss", "mistral"):
        assert family in out
    code, out, _ = run(capsys, "models", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == set(dg.catalog()) >= {"qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "qwen3-32b", "gpt-oss-20b",
                                              "jamba-mini-1.5", "falcon-h1-7b-instruct", "granite-4.0-h-tiny"}
    assert rows["gpt-oss-20b"]["sliding_window_layers"] == 12 and rows["gpt-oss-20b"]["kv_window_tokens"] == 128
    assert rows["gpt-oss-20b"]["max_context_tokens"] == 131_072  # 4,096 x YaRN factor 32
    assert rows["qwen3-32b"]["sliding_window_layers"] == 0 and rows["qwen3-32b"]["kv_window_tokens"] is None


def test_bytes_json_contract(capsys):
    code, out, _ = run(capsys, "bytes", "Qwen3.6-35B-A3B", "--prompt-tokens", "1024", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kv_bytes"] == 20_971_520 and data["ssm_bytes"] == 62_914_560 and data["conv_bytes"] == 1_474_560
    assert data["total_bytes"] == 85_360_640


def test_bytes_fp8_kv(capsys):
    _, out, _ = run(capsys, "bytes", "qwen3-32b", "--prompt-tokens", "16000", "--kv-dtype", "fp8", "--json")
    assert json.loads(out)["kv_bytes"] == 16000 * 131_072


def test_ttft_json_contract(capsys):
    code, out, _ = run(capsys, "ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--link", "25g", "--mfu", "1.0",
                       "--timing", "handoff", "--policy", "layer", "--gpu", "study-effective", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["ttft_s"] == pytest.approx(0.02919, abs=1e-5)  # the Figure 4 point under the calibration
    assert (data["gpu"], data["link"], data["mfu"], data["hbm_efficiency"]) == ("study-effective", "25g", 1.0, 1.0)
    code, out, _ = run(capsys, "ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--json")  # the defaults
    data = json.loads(out)
    # the defaults: the H100 SXM's efficiencies fitted to Vidur's profiles (depgraph/specs/data/fitted.json)
    fitted = dg.CostModel()
    assert (data["gpu"], data["link"], data["mfu"], data["hbm_efficiency"]) == (
        "h100-sxm", "ib-ndr", fitted.prefill_mfu, fitted.decode_hbm_efficiency) == ("h100-sxm", "ib-ndr", 0.644917, 0.852134)
    assert data["assumptions"] == f"attention 0.165, KV reads 0.909, 34.1 us a layer ({fitted.fit.describe()})"
    code, out, _ = run(capsys, "ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024")
    assert (f"ib-ndr, h100-sxm (prefill MFU 0.644917, decode HBM efficiency 0.852134; attention 0.165, KV reads 0.909, "
            f"34.1 us a layer ({fitted.fit.describe()})), ") in out.splitlines()[0]
    assert data["frontier_max"] >= 1
    assert sum(data["breakdown_s"].values()) == pytest.approx(data["ttft_s"], rel=1e-12)


def test_ttft_policies_ordered_via_cli(capsys):
    values = []
    for policy in ("compute-then-move", "global", "layer", "component"):
        _, out, _ = run(capsys, "ttft", "nemotron-3-nano-30b-a3b", "--prompt-tokens", "1024", "--link", "100g",
                        "--mfu", "1.0", "--policy", policy, "--json")
        values.append(json.loads(out)["ttft_s"])
    assert values == sorted(values, reverse=True)


def test_ttft_accepts_a_config_path_and_gbps_link(capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8,
                               "num_hidden_layers": 4, "intermediate_size": 4096, "vocab_size": 32000}))
    code, out, _ = run(capsys, "ttft", str(cfg), "--prompt-tokens", "512", "--link", "40gbps", "--json")
    assert code == 0 and json.loads(out)["link"] == "40gbps"


@pytest.mark.parametrize(
    "argv, field",
    [
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--mfu", "0"], "mfu"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--mfu", "1.5"], "mfu"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--mfu", "nan"], "mfu"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--mfu", "fast"], "--mfu"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "0"], "prompt_tokens"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--link", "carrier-pigeon"], "link"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--link", "0gbps"], "link"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--policy", "eager"], "policy"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--timing", "soon"], "timing"),
        (["ttft", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--gpu", "tpu"], "gpu"),
        (["ttft", "no-such-model", "--prompt-tokens", "1024"], "model"),
        (["bytes", "qwen3-32b", "--prompt-tokens", "-1"], "prompt_tokens"),
        (["bytes", "qwen3-32b", "--prompt-tokens", "1", "--kv-dtype", "fp7"], "kv_dtype"),
        (["ttft", "qwen3.6-35b-a3b"], "--prompt-tokens"),
        (["draw", "qwen3.6-35b-a3b", "--prompt-tokens", "8", "-o", "graph.xyz"], "--output"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(capsys, argv, field):
    with pytest.raises(SystemExit) if argv == ["ttft", "qwen3.6-35b-a3b"] or "fast" in argv else _nullcontext():
        code = main(argv)
        assert code == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert field in lines[0]
    assert "Traceback" not in err


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_bad_config_file_is_one_line(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "nemotron_h", "num_hidden_layers": 3, "hybrid_override_pattern": "M*"}')
    proc = subprocess.run([sys.executable, "-m", "depgraph.cli", "ttft", str(cfg), "--prompt-tokens", "10"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "hybrid_override_pattern" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_draw_writes_dot_and_svg(tmp_path, capsys):
    for suffix in ("dot", "svg"):
        out = tmp_path / f"g.{suffix}"
        code, _, err = run(capsys, "draw", "nemotron-3-nano-30b-a3b", "--prompt-tokens", "64", "--link", "100g",
                           "--policy", "global", "-o", str(out))
        assert code == 0, err
        text = out.read_text()
        assert ("digraph" in text) if suffix == "dot" else ("<svg" in text)
    assert not list(tmp_path.glob(".*tmp"))  # nothing half-written left behind


def test_import_depgraph_is_light_and_every_public_name_resolves():
    code = ("import sys, depgraph as dg; light = 'pandas' not in sys.modules; "
            "missing = [n for n in dg.__all__ if getattr(dg, n, None) is None]; "
            "print(light, missing, set(dg.__all__) <= set(dir(dg)), callable(dg.draw), dg.sweeps.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "[]", "True", "True", "depgraph.sweeps"]
    import depgraph as dg

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        dg.nothing_here  # noqa: B018


@pytest.mark.parametrize("argv, extra", [
    (["reproduce", "out"], "figures"),
    (["reproduce", "out", "--workers", "2"], "figures"),
    (["sweep", "a.toml"], ()),
    (["sweep", "a.toml", "--scheduler", "tcp://127.0.0.1:8786"], None),
    (["sweep", "a.toml", "--scheduler=tcp://127.0.0.1:8786"], None),
    (["reproduce", "out", "--workers", "1"], None),
    (["reproduce", "--workers=1"], None),
    (["reproduce", "--help"], None),
    (["ttft", "qwen3-32b"], None),
    ([], None),
])
def test_worker_commands_start_their_fork_server_first(monkeypatch, argv, extra):
    from depgraph.sweeps import workers as _workers
    from depgraph.cli import _warm_up

    calls = []
    monkeypatch.setattr(_workers, "warm_up", lambda more=(): calls.append(more))
    _warm_up(argv)
    assert calls == ([] if extra is None else [_workers.REPRODUCE if extra == "figures" else ()])


# ------------------------------------------------------------ issue 13: numbers, flags, --fresh


def _huge_graph(path):
    nodes = [{"id": "a", "duration_s": 1.7e308}, {"id": "b", "duration_s": 1.7e308}, {"id": "c", "duration_s": 1.0}]
    path.write_text(json.dumps({"directed": True, "multigraph": False, "graph": {}, "nodes": nodes,
                                "links": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}]}))
    return path


def test_a_schedule_that_overflows_is_refused_naming_a_node(tmp_path, capsys):
    import networkx as nx

    import depgraph as dg

    G = nx.DiGraph()
    G.add_node("a", duration_s=1.7e308)
    G.add_node("b", duration_s=1.7e308)
    G.add_edge("a", "b")
    with pytest.raises(dg.GraphError, match="node 'b' would finish at inf s"):
        dg.schedule(G)
    G.add_node("x", duration_s=1.7e308)  # the same sum on one resource: the list schedule overflows too
    G.nodes["x"]["resource"] = G.nodes["a"]["resource"] = "link"
    with pytest.raises(dg.GraphError, match="would finish at inf s"):
        dg.schedule(G)
    code, out, err = run(capsys, "schedule", str(_huge_graph(tmp_path / "g.json")), "--json")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "'b'" in err and "Infinity" not in err


def test_json_output_refuses_numbers_json_cannot_hold():
    from depgraph.cli import _dumps

    assert _dumps({"a": [1.5, {"b": 2}]}) == '{"a": [1.5, {"b": 2}]}'
    with pytest.raises(ValueError, match=r"JSON output: breakdown_s.wait_s is inf"):
        _dumps({"makespan_s": 1.0, "breakdown_s": {"wait_s": float("inf")}})
    with pytest.raises(ValueError, match=r"rows\[1\] is nan"):
        _dumps({"rows": [0.0, float("nan")]})


@pytest.mark.parametrize("address", ["not a url", "tcp://", "tcp://host", "http://host:8786", "tcp://h:0",
                                     "tcp://h:99999", "host:port"])
def test_scheduler_address_is_checked(capsys, address):
    with pytest.raises(SystemExit) as info:
        main(["sweep", "workloads/replay.toml", "--scheduler", address])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--scheduler" in err and "tcp://HOST:PORT" in err and repr(address) in err


@pytest.mark.parametrize("address", ["tcp://10.0.0.5:8786", "tls://scheduler.local:8786", "10.0.0.5:8786",
                                     "tcp://[::1]:8786", "ws://my-host_1:80"])
def test_scheduler_addresses_dask_takes(address):
    from depgraph.cli import _build_parser

    assert _build_parser().parse_args(["sweep", "x.toml", "--scheduler", address]).scheduler == address


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_reproduce_checks_workers_as_sweep_does(capsys, value):
    errors = []
    for command in (["sweep", "x.toml"], ["reproduce", "out"]):
        with pytest.raises(SystemExit) as info:
            main([*command, "--workers", value])
        assert info.value.code == 2
        errors.append(capsys.readouterr().err)
    assert errors[0].replace("depgraph sweep", "depgraph reproduce") == errors[1]
    assert f"argument --workers: expected an integer >= 1, got {value!r}" in errors[1]


@pytest.mark.parametrize("flags, resume", [([], True), (["--fresh"], False)])
def test_reproduce_fresh_recomputes_every_point(monkeypatch, capsys, tmp_path, flags, resume):
    import inspect

    from depgraph.studies import reproduce

    assert inspect.signature(reproduce.write_reproduction).parameters["resume"].default is True
    seen = {}
    monkeypatch.setattr(reproduce, "write_reproduction", lambda out, **kw: seen.update(kw) or tmp_path / "report.md")
    code, out, _ = run(capsys, "reproduce", str(tmp_path), "--workers", "1", "--quiet", *flags)
    assert code == 0 and out == f"wrote {tmp_path / 'report.md'}\n"
    assert seen["resume"] is resume and seen["workers"] == 1


@pytest.mark.parametrize("argv", [["sweep", "a.toml", "--workers", "0"], ["reproduce", "--workers=x"],
                                  ["reproduce", "out", "--workers", "-2"]])
def test_no_fork_server_for_a_workers_value_the_parser_refuses(monkeypatch, argv):
    from depgraph.sweeps import workers as _workers
    from depgraph.cli import _warm_up

    calls = []
    monkeypatch.setattr(_workers, "warm_up", lambda more=(): calls.append(more))
    _warm_up(argv)
    assert calls == []


def test_every_option_has_help_that_says_its_default():
    import argparse

    from depgraph.cli import LINK_HELP, _build_parser

    parser = _build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        formatter = command._get_formatter()
        for action in command._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            flag = (action.option_strings or [action.dest])[0]
            assert action.help, f"{name} {flag}: no help"
            if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
                assert "default" in formatter._get_help_string(action).lower(), f"{name} {flag}: default not said"
            if flag == "--link":
                assert action.help.startswith(LINK_HELP), f"{name} --link: another help text"


def test_version():
    import subprocess
    import sys

    from depgraph import __version__

    done = subprocess.run([sys.executable, "-m", "depgraph.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"depgraph {__version__}"


def test_the_load_model_flags_come_from_its_fields():
    """The loadtest command's load-model flags are built from serving.params.LOAD_MODEL_FLAGS, one entry a
    LoadModel field, and read back by it: a flag given sets its field, an absent one leaves the default."""
    import dataclasses

    from depgraph.cli.args import _field_values
    from depgraph.cli.parser import _build_parser
    from depgraph.serving.params import LOAD_MODEL_FLAGS, LoadModel

    fields = {f.name for f in dataclasses.fields(LoadModel)}
    assert set(LOAD_MODEL_FLAGS) <= fields
    parser = _build_parser()
    args = parser.parse_args(["loadtest", "qwen3-32b", "--handoff", "push", "--decode-tp", "4", "--no-collectives",
                              "--link", "25g", "--prefill-servers", "2"])
    # an absent --tp is left to the load model (vLLM's TP 1) or to a --calibration's TP; the all-reduces are on
    # unless --no-collectives
    assert LoadModel().tp == 1 and LoadModel().collectives is True
    assert _field_values(args, LOAD_MODEL_FLAGS) == {"decode_tp": 4, "collectives": False, "link": "25g",
                                                     "prefill_servers": 2, "slot_scope": "running"}
    plain = parser.parse_args(["loadtest", "qwen3-32b", "--handoff", "push"])
    assert _field_values(plain, LOAD_MODEL_FLAGS) == {"slot_scope": "running"}  # collectives, tp: the defaults
    sub = next(a for a in parser._actions if a.dest == "command").choices["loadtest"]
    helps = {a.option_strings[0]: a.help for a in sub._actions if a.option_strings}
    for f in LOAD_MODEL_FLAGS.values():
        assert f.flag in helps and (f.help is None or helps[f.flag].startswith(f.help))


# ------------------------------------------------------------ a flag's prefix is not the flag


def _prefix_case(command):
    """An argv for ``command`` that parses (its positionals and required flags
    given), and one of its long flags with its value (none for a switch), that
    a prefix of it would have stood for under argparse's abbreviations (the
    prefix matches no other flag of the command)."""
    import argparse

    argv = [a.metavar or "x" for a in command._actions if not a.option_strings and a.nargs is None]
    for action in command._actions:
        if action.option_strings and action.required:
            argv += [action.option_strings[-1], "1"]
    flags = command._option_string_actions
    for action in command._actions:  # the command's own flags first, then --memory-budget, --hardware
        if action.required or isinstance(action, argparse._HelpAction):
            continue
        for flag in action.option_strings:
            prefix = flag[:-1]
            if flag.startswith("--") and len(prefix) > 3 and [f for f in flags if f.startswith(prefix)] == [flag]:
                value = [] if action.nargs == 0 else [str(action.choices[0]) if action.choices else "1"]
                return argv, flag, prefix, value
    raise AssertionError(f"{command.prog}: no long flag")


def _refused(capsys, *argv):
    """Exit status, standard output and error of a command line the parser refuses."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def test_every_command_refuses_a_prefix_of_its_flags(capsys, monkeypatch):
    """``plan ... --tp 4`` was read as ``--tps 4``: every command (the list read off
    the parser, so a new one is covered) takes a long flag only whole, and a
    prefix of one is refused with exit 2 and one line naming it."""
    import argparse

    from depgraph.cli.parser import _build_parser
    from depgraph.sweeps import workers as _workers

    monkeypatch.setattr(_workers, "warm_up", lambda more=(): None)  # sweep, reproduce: no worker processes
    parser = _build_parser()
    assert parser.allow_abbrev is False
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(sub.choices) >= 17
    for name, command in sub.choices.items():
        assert command.allow_abbrev is False, name
        argv, flag, prefix, value = _prefix_case(command)
        parser.parse_args([name, *argv, flag, *value])  # the whole flag is taken
        code, out, err = _refused(capsys, name, *argv, prefix, *value)
        assert code == 2 and out == "", (name, prefix, err)
        assert err.count("\n") == 1 and f"unrecognized arguments: {prefix} " in err, (name, err)
    # before the command, too, and the report's own example
    code, _, err = _refused(capsys, "--memory-budg=4", "models")
    assert code == 2 and err.count("\n") == 1 and "unrecognized arguments: --memory-budg=4" in err
    code, _, err = _refused(capsys, "plan", "qwen3.6-35b-a3b", "--gpus", "16", "--qps", "8", "--prompt-tokens", "4096",
                            "--out-tokens", "256", "--slo-ttft-ms", "1500", "--slo-tpot-ms", "40", "--tp", "4")
    assert code == 2 and err.count("\n") == 1 and "unrecognized arguments: --tp 4" in err
