"""Links and GPUs from the shipped hardware data."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import depgraph as dg
from depgraph.specs.hardware import gpu_names, link_names

LINKS = ("pcie4", "pcie5", "nvlink4", "nvlink5", "ib-hdr", "ib-ndr", "ib-xdr", "roce-25g", "roce-100g", "roce-200g",
         "roce-400g", "roce-800g", "400g", "200g", "100g", "25g")
GPUS = ("study-effective", "a100-40g", "a100-80g", "h100-sxm", "h100-pcie", "h200", "b200", "l40s", "mi300x", "mi325x")


def test_catalog_names():
    assert tuple(link_names()) == LINKS
    assert tuple(gpu_names()) == GPUS


def test_25g_in_bytes():
    link = dg.load_link("25g")
    assert link.bytes_per_s == 3.125e9  # 25e9 bit/s / 8, exact in binary floating point
    assert (link.name, link.bandwidth_gbps, link.latency_s) == ("25g", 25.0, 0.0)


def test_qwen36_conv_tail_takes_about_16_microseconds_on_25g():
    layer = dg.load_model("qwen3.6-35b-a3b").layers[0]
    assert layer.kind == "gdn" and layer.conv_bytes == 49_152
    t = dg.load_link("25g").transfer_s(layer.conv_bytes)
    # The study's figure is "about 16 us"; the exact value is 15.73 us.
    assert 15.5e-6 < t < 16.5e-6
    assert t == 49_152 / 3.125e9
    # ...and that is the duration of the conv-tail send in the event graph.
    G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4)
    assert G.nodes["r0:send:L00:conv"]["duration_s"] == t


@pytest.mark.parametrize(
    "text, gbps, name",
    [
        ("40gbps", 40.0, "40gbps"),
        ("2.5gbps", 2.5, "2.5gbps"),
        ("2.5GBPS", 2.5, "2.5gbps"),
        ("  100 Gbps ", 100.0, "100gbps"),
        ("0.001gbps", 0.001, "0.001gbps"),
        ("007.50gbps", 7.5, "7.5gbps"),
    ],
)
def test_gbps_strings(text, gbps, name):
    link = dg.load_link(text)
    assert (link.bandwidth_gbps, link.name, link.latency_s) == (gbps, name, 0.0)
    assert link.bytes_per_s == gbps * 1e9 / 8


def test_gbps_upper_limit_is_inclusive():
    assert dg.load_link("1000000gbps").bandwidth_gbps == 1e6


@given(st.integers(0, 999_999), st.integers(0, 999), st.sampled_from(["gbps", "GBPS", "Gbps", " gbps "]))
def test_gbps_parsing_reads_the_number(whole, thousandths, unit):
    digits = f"{whole}.{thousandths:03d}"
    if whole == 0 and thousandths == 0:
        with pytest.raises(dg.ConfigError):
            dg.load_link(digits + unit)
    else:
        assert dg.load_link(digits + unit).bandwidth_gbps == float(digits)


@pytest.mark.parametrize(
    "text",
    ["2.5gbps", "40gbps", "0.001gbps", "123456gbps", "25g", "pcie",
     "1000000gbps", "1234.5678gbps"],
)
def test_a_link_name_reads_back_as_the_same_link(text):
    # Workloads record link.name in G.graph["link"]; it must identify the link.
    link = dg.load_link(text)
    assert dg.load_link(link.name) == link


@pytest.mark.parametrize(
    "text, canonical",
    [("pcie", "pcie4"), ("PCIe", "pcie4"), ("pcie-gen4", "pcie4"), ("nvlink", "nvlink4"), ("NVLink", "nvlink4"),
     ("25G", "25g"), (" 100g ", "100g"), ("100gbe", "100g"), ("25gbe", "25g")],
)
def test_names_and_aliases_are_case_insensitive(text, canonical):
    assert dg.load_link(text) == dg.load_link(canonical)
    assert dg.load_link(text).name == canonical


def test_alias_bandwidths():
    assert dg.load_link("pcie").bandwidth_gbps == 200.0  # 25 GB/s effective
    assert dg.load_link("nvlink").bandwidth_gbps == 3600.0  # 450 GB/s per direction


@pytest.mark.parametrize(
    "bad",
    [
        "0gbps",
        "0.0gbps",
        "1000001gbps",
        "-5gbps", "fast", "", "nan gbps", "infgbps", "1e3gbps", "5 gb/s", "25", 3, 25.0, None, b"25g",
    ],
)
def test_bad_links_list_the_allowed_names(bad):
    with pytest.raises(dg.ConfigError) as err:
        dg.load_link(bad)
    message = str(err.value)
    assert message.startswith("link: ") and repr(bad) in message
    assert all(name in message for name in LINKS) and "<n>gbps" in message


@pytest.mark.parametrize("bandwidth_gbps, latency_s, field", [(0.0, 0.0, "link.bandwidth_gbps"), (float("nan"), 0.0, "link.bandwidth_gbps"),
                                                                (10.0, -1e-6, "link.latency_s"), (10.0, float("inf"), "link.latency_s")])
def test_bad_link_object_is_refused(bandwidth_gbps, latency_s, field):
    with pytest.raises(dg.ConfigError, match=f"^{field}: "):
        dg.load_link(dg.Link("custom", bandwidth_gbps, latency_s))


def test_link_object_passes_through_and_latency_adds():
    link = dg.Link("custom", 8.0, latency_s=2e-6)
    assert dg.load_link(link) is link
    assert link.transfer_s(1e9) == 2e-6 + 1.0
    assert link.transfer_s(0) == 2e-6


# ---------------------------------------------------------------------- GPUs


def test_h100():
    gpu = dg.load_gpu("h100")
    assert gpu == dg.load_gpu("H100-SXM") and gpu.name == "h100-sxm"
    # the datasheet's 1,979 TFLOP/s with sparsity, halved; fp8 likewise; NVLink 4's 900 GB/s both ways, halved
    assert gpu.peak_bf16_flops == 989.5e12 and gpu.hbm_bytes_per_s == 3.35e12 and gpu.peak_fp8_flops == 1979e12
    assert gpu.interconnect == "NVLink 4" and gpu.interconnect_bytes_per_s == 450e9 and gpu.hbm_efficiency is None


def test_calibration_device_is_a_quarter_h100():
    # Defined in docs/calibration.md: 989 TFLOP/s and an H100 SXM's HBM bandwidth, each divided by 4, used whole.
    eff, h100 = dg.load_gpu("study-effective"), dg.load_gpu("h100-sxm")
    assert eff.peak_bf16_flops == 989e12 / 4
    assert eff.hbm_bytes_per_s == h100.hbm_bytes_per_s / 4
    assert eff.hbm_efficiency == 1.0


@pytest.mark.parametrize("name", GPUS)
def test_every_gpu_names_its_source(name):
    gpu = dg.load_gpu(name)
    assert gpu.source and gpu.description
    if name != "study-effective":
        assert gpu.interconnect and gpu.interconnect_bytes_per_s and "http" in gpu.source


@pytest.mark.parametrize("name", GPUS)
def test_capacity_is_the_usable_total_beside_the_datasheet_figure(name):
    gpu = dg.load_gpu(name)
    assert gpu.hbm_datasheet_bytes and gpu.hbm_source
    # what the driver reports (in GiB) is within 7% of the datasheet's gigabytes read as GiB, never above them
    assert 0.93 * gpu.hbm_datasheet_bytes <= gpu.hbm_bytes <= gpu.hbm_datasheet_bytes / 1e9 * 2 ** 30


def test_h100_capacity_is_what_torch_reports():
    gpu = dg.load_gpu("h100-sxm")
    assert round(gpu.hbm_bytes / 2 ** 30, 2) == 79.22 and gpu.hbm_datasheet_bytes == 80e9
    assert round(dg.load_gpu("h200").hbm_bytes / 2 ** 30, 2) == 139.81
    assert round(dg.load_gpu("a100-80g").hbm_bytes / 2 ** 30, 2) == 79.15


@pytest.mark.parametrize("name", LINKS)
def test_every_link_names_its_source(name):
    link = dg.load_link(name)
    assert link.source and link.description
    # an RDMA network pays a per-message latency; the study's line-rate links and on-node fabrics do not
    assert (link.latency_s > 0) == name.startswith(("ib-", "roce-"))


@pytest.mark.parametrize("name", GPUS)
def test_catalog_gpus_are_sane(name):
    gpu = dg.load_gpu(name)
    assert gpu.peak_bf16_flops > 1e14 and gpu.hbm_bytes_per_s > 1e11 and gpu.hbm_bytes > 1e10
    assert dg.load_gpu(gpu) is gpu


@pytest.mark.parametrize("bad", ["h1000", "", "tpu", 3, None])
def test_unknown_gpu_lists_the_allowed_names(bad):
    with pytest.raises(dg.ConfigError) as err:
        dg.load_gpu(bad)
    message = str(err.value)
    assert message.startswith("gpu: expected one of ") and message.endswith(f"got {bad!r}")
    assert all(name in message for name in GPUS)


def test_errors_and_catalog_commands_show_the_aliases(tmp_path, monkeypatch):
    """--gpu h100 is taken (an alias of h100-sxm): the errors that list the GPUs or links, and
    depgraph gpus / links (text and JSON), show each name's aliases, a --hardware file's too."""
    import json
    import subprocess
    import sys

    from depgraph.specs import hardware
    from depgraph.strategies import _check_link

    with pytest.raises(dg.ConfigError) as err:
        dg.load_gpu("tpu")
    assert "a100-80g (aliases a100, a100-sxm), h100-sxm (alias h100), h100-pcie, h200 (alias h200-sxm)," in str(err.value)
    assert "mi300x (alias mi300), mi325x; got 'tpu'" in str(err.value)
    for bad in ("carrier-pigeon", 3):
        with pytest.raises(dg.ConfigError) as err:
            dg.load_link(bad)
        assert "pcie4 (aliases pcie, pcie-gen4), pcie5 (alias pcie-gen5), nvlink4 (alias nvlink), nvlink5," in \
            str(err.value) and "ib-ndr (alias ndr)" in str(err.value) and "25g (alias 25gbe)" in str(err.value)
    with pytest.raises(Exception, match=r"ib-ndr \(alias ndr\)"):
        _check_link("link", "carrier-pigeon")
    for alias, name in (("h100", "h100-sxm"), ("a100-sxm", "a100-80g"), ("mi300", "mi300x")):
        assert dg.load_gpu(alias).name == name
    proc = subprocess.run([sys.executable, "-m", "depgraph.cli", "ttft", "qwen3-32b", "--prompt-tokens", "8",
                           "--gpu", "h1000"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "h100-sxm (alias h100)" in proc.stderr

    for command, names, aliases in (("gpus", GPUS, hardware.gpu_aliases()), ("links", LINKS, hardware.link_aliases())):
        rows = json.loads(subprocess.run([sys.executable, "-m", "depgraph.cli", command, "--json"],
                                         capture_output=True, text=True, check=True).stdout)
        assert {r["name"]: r["aliases"] for r in rows} == aliases and list(aliases) == list(names)
        text = subprocess.run([sys.executable, "-m", "depgraph.cli", command], capture_output=True, text=True,
                              check=True).stdout.splitlines()
        assert text[0].split()[1] == "aliases"
        lines = {line.split()[0]: line for line in text[1:]}
        for name in names:
            shown = lines[name][len(text[0].split("aliases")[0]):].split("  ")[0].strip()
            assert shown == (", ".join(aliases[name]) or "-"), (name, shown)
    assert hardware.gpu_aliases()["h100-sxm"] == ["h100"] and hardware.link_aliases()["ib-ndr"] == ["ndr"]

    monkeypatch.delenv(hardware.HARDWARE_ENV, raising=False)
    path = tmp_path / "lab.toml"
    path.write_text('[gpus.lab-gpu]\npeak_bf16_flops = 5e14\nhbm_bytes_per_s = 2e12\nhbm_bytes = 9.6e10\n'
                    'description = "our card"\n\n[gpu_aliases]\nlab = "lab-gpu"\n')
    try:
        hardware.use_hardware(path)
        assert dg.load_gpu("lab").name == "lab-gpu" and hardware.gpu_aliases()["lab-gpu"] == ["lab"]
        with pytest.raises(dg.ConfigError, match=r"lab-gpu \(alias lab\)"):
            dg.load_gpu("tpu")
    finally:
        hardware.use_hardware(None)


# ---------------------------------------------------------------------- a user's hardware file


def test_a_hardware_file_adds_and_replaces_entries(tmp_path, monkeypatch):
    from depgraph.specs import hardware

    monkeypatch.delenv(hardware.HARDWARE_ENV, raising=False)
    toml = tmp_path / "lab.toml"
    toml.write_text('[gpus.lab-gpu]\npeak_bf16_flops = 5e14\nhbm_bytes_per_s = 2e12\nhbm_bytes = 9.6e10\n'
                    'description = "our card"\nsource = "vendor sheet"\n\n[links.lab-net]\nbandwidth_gbps = 200\n'
                    'latency_s = 3e-6\ndescription = "our fabric"\n\n[links.25g]\nbandwidth_gbps = 20\nlatency_s = 0\n'
                    'description = "derated"\n')
    try:
        hardware.use_hardware(toml)
        assert dg.load_gpu("lab-gpu").peak_bf16_flops == 5e14 and dg.load_gpu("lab-gpu").source == "vendor sheet"
        assert dg.load_link("lab-net").transfer_s(25e9) == 3e-6 + 1.0
        assert dg.load_link("25g").bandwidth_gbps == 20.0  # replaced
        assert "lab-gpu" in gpu_names() and "h100-sxm" in gpu_names()
    finally:
        hardware.use_hardware(None)
    assert "lab-gpu" not in gpu_names() and dg.load_link("25g").bandwidth_gbps == 25.0
    js = tmp_path / "lab.json"
    js.write_text('{"links": {"lab-net": {"bandwidth_gbps": 100, "latency_s": 0, "description": "x"}}}')
    try:
        hardware.use_hardware(js)
        assert dg.load_link("lab-net").bandwidth_gbps == 100.0
    finally:
        hardware.use_hardware(None)


@pytest.mark.parametrize("text, message", [
    ('[gpus.x]\npeak_bf16_flops = -1\nhbm_bytes_per_s = 1e12\nhbm_bytes = 1e10\ndescription = "x"\n',
     r"gpus.x.peak_bf16_flops: expected a finite number > 0"),
    ('[gpus.x]\npeak_bf16_flops = 1e14\nhbm_bytes_per_s = 1e12\ndescription = "x"\n',
     r"gpus.x.hbm_bytes: expected a finite number > 0 .*got None"),
    ('[gpus.x]\npeak_bf16_flops = 1e14\nhbm_bytes_per_s = 1e12\nhbm_bytes = 1e10\ndescription = "x"\nflops = 1\n',
     r"gpus.x.flops: not a field; expected one of"),
    ('[gpus.x]\npeak_bf16_flops = 1e14\nhbm_bytes_per_s = 1e12\nhbm_bytes = 1e10\nhbm_datasheet_bytes = 0\n'
     'description = "x"\n', r"gpus.x.hbm_datasheet_bytes: expected a finite number > 0"),
    ('[gpus.x]\npeak_bf16_flops = 1e14\nhbm_bytes_per_s = 1e12\nhbm_bytes = 1e10\nhbm_source = 3\n'
     'description = "x"\n', r"gpus.x.hbm_source: expected a string, got 3"),
    ('[links.y]\nbandwidth_gbps = 100\nlatency_s = 11\ndescription = "y"\n', r"links.y.latency_s: .*<= 10"),
    ('[links.y]\nbandwidth_gbps = 100\nlatency_s = 0\n', r"links.y.description: expected a string, got None"),
    ('[linkz.y]\nbandwidth_gbps = 100\n', r"linkz: not a hardware section; expected one of gpus, links"),
    ('[gpu_aliases]\nfast = "nowhere"\n', r"gpu_aliases.fast: expected one of .*got 'nowhere'"),
    ('[links."Big Net"]\nbandwidth_gbps = 1\nlatency_s = 0\ndescription = "z"\n', r"links.Big Net: expected a name"),
    ("[gpus\n", r"not valid TOML"),
])
def test_a_bad_hardware_file_is_one_line(tmp_path, text, message):
    from depgraph.specs import hardware

    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(dg.ConfigError, match=message) as err:
        hardware.use_hardware(path)
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)
    assert hardware.HARDWARE_ENV not in __import__("os").environ


def test_gpus_and_links_commands(tmp_path):
    import json
    import subprocess
    import sys

    for command in ("gpus", "links"):
        out = subprocess.run([sys.executable, "-m", "depgraph.cli", command, "--json"], capture_output=True,
                             text=True, check=True).stdout
        rows = json.loads(out)
        assert [r["name"] for r in rows] == list(GPUS if command == "gpus" else LINKS)
        assert all(r["source"] for r in rows)
    rows = {r["name"]: r for r in json.loads(subprocess.run([sys.executable, "-m", "depgraph.cli", "gpus", "--json"],
                                                            capture_output=True, text=True, check=True).stdout)}
    assert rows["h100-sxm"]["hbm_bytes"] == dg.load_gpu("h100-sxm").hbm_bytes
    assert rows["h100-sxm"]["hbm_datasheet_bytes"] == 80e9 and rows["h100-sxm"]["hbm_source"]
    path = tmp_path / "lab.toml"
    path.write_text('[gpus.lab-gpu]\npeak_bf16_flops = 5e14\nhbm_bytes_per_s = 2e12\nhbm_bytes = 9.6e10\n'
                    'description = "our card"\n')
    out = subprocess.run([sys.executable, "-m", "depgraph.cli", "gpus", "--hardware", str(path)], capture_output=True,
                         text=True, check=True).stdout
    assert "lab-gpu" in out  # a user's entry without a datasheet figure
    path.write_text('[gpus.lab-gpu]\npeak_bf16_flops = 5e14\nhbm_bytes_per_s = 2e12\nhbm_bytes = 9.6e10\n'
                    'hbm_datasheet_bytes = 1e11\nhbm_source = "nvidia-smi"\ndescription = "our card"\n')
    rows = json.loads(subprocess.run([sys.executable, "-m", "depgraph.cli", "gpus", "--json", "--hardware", str(path)],
                                     capture_output=True, text=True, check=True).stdout)
    lab = next(r for r in rows if r["name"] == "lab-gpu")
    assert lab["hbm_datasheet_bytes"] == 1e11 and lab["hbm_source"] == "nvidia-smi"
    bad = subprocess.run([sys.executable, "-m", "depgraph.cli", "ttft", "qwen3-32b", "--prompt-tokens", "10",
                          "--hardware", str(tmp_path / "missing.toml")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "missing.toml" in bad.stderr


def test_an_entry_named_like_a_shipped_alias_is_that_entry(tmp_path, monkeypatch):
    from depgraph.specs import hardware

    monkeypatch.delenv(hardware.HARDWARE_ENV, raising=False)
    path = tmp_path / "h.toml"
    path.write_text('[gpus.h100]\npeak_bf16_flops = 1e14\nhbm_bytes_per_s = 1e12\nhbm_bytes = 8e10\ndescription = "ours"\n')
    try:
        hardware.use_hardware(path)
        assert dg.load_gpu("h100").peak_bf16_flops == 1e14 and dg.load_gpu("h100").name == "h100"
        assert dg.load_gpu("h100-sxm").peak_bf16_flops == 989.5e12
        assert gpu_names().count("h100-sxm") == 1
    finally:
        hardware.use_hardware(None)
