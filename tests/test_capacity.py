"""The capacity planner: the push/pull study's numbers, verdicts, link units and the CLI."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import depgraph as dg
from depgraph.specs.memory import stage_kv_cache_bytes
from depgraph.serving.capacity import STATUSES, decode_memory_per_slot_bytes, plan, slots_held, transfer_time_s
from depgraph.cli import main

# The study's run: Qwen3-32B on TP 8, 16,000-token prompts, 128-token answers, 8 req/s, --max-num-seqs 8.
STUDY = dict(qps=8, prompt_tokens=16_000, out_tokens=128, max_num_seqs=8, tp=8, link="50GBps")
PULL_TPOT_S, PUSH_TPOT_S = 10.4e-3, 7.0e-3


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ the study's numbers


def _study_kv_bytes(tokens, layers, kv_heads, head_dim, dtype_bytes=2):
    # Verbatim from the study's "Role 1, capacity" snippet.
    return tokens * layers * 2 * kv_heads * head_dim * dtype_bytes


def _study_transfer_ms(nbytes, link_gb_s, tp=1):
    return nbytes / tp / (link_gb_s * 1e9) * 1000


def test_16k_tokens_of_qwen3_32b_are_about_4_2_gb():
    b = dg.handoff_bytes(dg.load_model("qwen3-32b"), prompt_tokens=16_000)
    # 256 KiB per token x 16,000 tokens, exact; a dense model has no recurrent state.
    assert b == {"kv": 4_194_304_000, "ssm": 0, "conv": 0}
    assert b["kv"] == 256 * 1024 * 16_000
    # The study's own formula (64 layers, 8 KV heads, head_dim 128, bf16) gives the same bytes.
    assert _study_kv_bytes(16_000, 64, 8, 128) == b["kv"]
    # "4.2 GB": the text rounds to one decimal, so +-0.05 GB.
    assert plan("qwen3-32b", tpot_s=PULL_TPOT_S, **STUDY).total_bytes / 1e9 == pytest.approx(4.2, abs=0.05)


def test_16k_tokens_cross_tp8_at_50_gb_s_in_about_10_5_ms():
    t = transfer_time_s(4_194_304_000, "50GBps", tp=8)
    # Exact: 4,194,304,000 B / 8 GPUs / 50e9 B/s = 10.48576 ms (the link has no latency term).
    assert t == pytest.approx(10.48576e-3, rel=1e-12)
    assert t * 1e3 == pytest.approx(_study_transfer_ms(4_194_304_000, 50, tp=8), rel=1e-12)
    # "about 10.5 ms" (TL;DR: "about 10 ms"): one decimal, so +-0.05 ms.
    assert t * 1e3 == pytest.approx(10.5, abs=0.05)
    assert plan("qwen3-32b", tpot_s=PULL_TPOT_S, **STUDY).transfer_s == t


@pytest.mark.parametrize(
    "tpot_s, exact, printed",
    [(PULL_TPOT_S, 10.6496, 10.6),  # pull: 8 x 128 x 10.4 ms
     (PUSH_TPOT_S, 7.168, 7.2)],  # push: 8 x 128 x 7.0 ms
)
def test_slots_held_by_littles_law(tpot_s, exact, printed):
    held = slots_held(8, 128, tpot_s)
    assert held == pytest.approx(exact, rel=1e-12)  # a product of three numbers: only rounding error
    assert round(held, 1) == printed  # the study prints one decimal
    assert plan("qwen3-32b", tpot_s=tpot_s, **STUDY).slots_held == held


def test_pull_asks_for_more_slots_than_exist():
    p = plan("qwen3-32b", tpot_s=PULL_TPOT_S, **STUDY)
    assert (p.status, p.fits) == ("over_capacity", False)
    assert p.utilization == pytest.approx(10.6496 / 8, rel=1e-12)
    assert p.verdict.startswith("over capacity: 10.6 slots held") and "max_num_seqs is 8" in p.verdict
    assert (p.slots_needed, p.extra_slots, p.recommended_max_num_seqs) == (14, 6, 14)  # ceil(10.65 / 0.8) = 14


def test_push_fits_the_slots_but_not_the_headroom():
    p = plan("qwen3-32b", tpot_s=PUSH_TPOT_S, **STUDY)
    assert (p.status, p.fits) == ("above_headroom", False)
    assert p.headroom_slots == pytest.approx(6.4, rel=1e-12)
    # Says what it means: not "fits", and the numbers the study prints.
    assert not p.verdict.startswith("fits") and p.verdict.startswith("tight: 7.2 of 8 slots held (90%)")
    assert "80% headroom target" in p.verdict
    assert (p.slots_needed, p.extra_slots) == (9, 1)  # ceil(7.168 / 0.8) = ceil(8.96)


def test_low_load_is_within_headroom():
    # "At 1 request per second, even pull holds barely one slot."
    p = plan("qwen3-32b", tpot_s=PULL_TPOT_S, **{**STUDY, "qps": 1})
    assert p.slots_held == pytest.approx(1.3312, rel=1e-12)
    assert (p.status, p.fits, p.extra_slots, p.slots_needed) == ("within_headroom", True, 0, 2)
    assert p.verdict.startswith("fits: 1.3 of 8 slots held (17%)")


@pytest.mark.parametrize(
    "tpot_s, status",
    [(6.25e-3, "within_headroom"),  # 8 x 128 x 6.25 ms = 6.4 slots, exactly the 80% target
     (7.8125e-3, "above_headroom"),  # = 8.0 slots, exactly max_num_seqs: full, not over
     (7.82e-3, "over_capacity")],
)
def test_verdict_boundaries_are_inclusive(tpot_s, status):
    p = plan("qwen3-32b", tpot_s=tpot_s, **STUDY)
    assert p.status == status
    assert p.fits == (status == "within_headroom") == (p.extra_slots == 0)
    assert p.verdict.split(":")[0] == {"within_headroom": "fits", "above_headroom": "tight",
                                       "over_capacity": "over capacity"}[status]


@given(st.floats(0.01, 100), st.integers(1, 4096), st.floats(1e-4, 0.1), st.integers(1, 512), st.floats(0.05, 1.0))
def test_statuses_agree_with_slots_needed(qps, out_tokens, tpot_s, max_num_seqs, headroom):
    p = plan("qwen3-32b", qps=qps, prompt_tokens=1000, out_tokens=out_tokens, tpot_s=tpot_s,
             max_num_seqs=max_num_seqs, headroom=headroom)
    assert p.status in STATUSES
    assert p.fits == (p.slots_needed <= max_num_seqs) == (p.status == "within_headroom")
    assert (p.status == "over_capacity") == (p.slots_held > max_num_seqs * (1 + 1e-9))
    # slots_needed is the smallest setting that holds the load within headroom (up to float slack).
    assert p.slots_held <= headroom * p.slots_needed * (1 + 1e-9)
    assert p.slots_needed == 1 or p.slots_held > headroom * (p.slots_needed - 1) * (1 - 1e-9)


# ------------------------------------------------------------------ memory


def test_decode_memory_per_slot_and_for_the_extra_slots():
    p = plan("qwen3-32b", tpot_s=PULL_TPOT_S, gpu="h200", **STUDY)  # the study's decode GPU
    per_slot = 262_144 * (16_000 + 128) / 8  # KV at prompt + output tokens, one eighth per GPU
    assert p.context_tokens == 16_128 and p.memory_per_slot_bytes == per_slot
    assert p.extra_memory_bytes == 6 * per_slot
    m = dg.load_model("qwen3-32b")
    weights = (m.total_params + m.embedding_params + m.lm_head_params) * 2 / 8
    assert p.weights_per_gpu_bytes == weights and 8.0e9 < weights < 8.4e9  # a 32.8B-parameter model in bf16 on 8 GPUs
    # the study's decode GPU, as its driver reports it (139.81 GiB), and vLLM's start-up accounting on it
    assert p.gpu == "h200" and p.usable_hbm_bytes == int(0.9 * dg.load_gpu("h200").hbm_bytes)
    [kv] = stage_kv_cache_bytes(m, gpu="h200", tp=8, max_num_seqs=8)
    assert p.kv_pool_bytes == kv == p.usable_hbm_bytes - int(weights) - p.activation_bytes - p.non_torch_bytes
    assert p.memory_needed_bytes == weights + p.activation_bytes + p.non_torch_bytes + 14 * per_slot
    assert p.memory_fits and p.max_slots_in_memory == math.floor(kv / per_slot)
    assert "raise max_num_seqs to 14 (+6 slots" in p.advice and p.advice.endswith("fits")


def test_memory_that_does_not_fit_says_so():
    # 100k-token prompts with 2,000-token answers need 208 slots of 3.3 GB each (a long-context Qwen3-32B:
    # the catalog's stops at 40,960 tokens)
    config = json.loads(Path(dg.catalog()["qwen3-32b"]).read_text())
    del config["max_position_embeddings"]
    long_context = dg.model_from_config(config, name="qwen3-32b")
    p = plan(long_context, tpot_s=PULL_TPOT_S, gpu="h200", **{**STUDY, "prompt_tokens": 100_000, "out_tokens": 2_000})
    assert p.slots_needed == 208 and not p.memory_fits
    # 37: the KV cache vLLM sizes on an H200 (139.81 GiB as its driver reports it; 35 with the datasheet's 141e9)
    assert p.max_slots_in_memory == 37 and "does NOT fit (memory holds 37 slots)" in p.advice


def test_larger_gpu_and_utilization_change_only_the_memory_check():
    base = plan("qwen3-32b", tpot_s=PULL_TPOT_S, **STUDY)
    h200 = plan("qwen3-32b", tpot_s=PULL_TPOT_S, gpu="h200", gpu_memory_utilization=0.5, **STUDY)
    assert h200.usable_hbm_bytes == int(0.5 * dg.load_gpu("h200").hbm_bytes) and h200.gpu == "h200"
    assert (h200.slots_held, h200.transfer_s, h200.status) == (base.slots_held, base.transfer_s, base.status)


def test_hybrid_model_includes_recurrent_and_conv_state():
    p = plan("qwen3.6-35b-a3b", qps=2, prompt_tokens=1024, out_tokens=128, tpot_s=7e-3, max_num_seqs=8)
    # The models module's own numbers for 1,024 tokens (see depgraph.specs.models).
    assert (p.kv_bytes, p.ssm_bytes, p.conv_bytes) == (20_971_520, 62_914_560, 1_474_560)
    assert p.total_bytes == 85_360_640
    assert p.link == "ib-ndr" and p.transfer_s == 1.26e-6 + p.total_bytes / 50e9  # 400 Gbit/s plus one message
    per_slot = decode_memory_per_slot_bytes("qwen3.6-35b-a3b", 1024 + 128)
    assert per_slot["ssm"] == 62_914_560 and per_slot["conv"] == 1_474_560
    assert per_slot["total"] == per_slot["kv"] + 62_914_560 + 1_474_560 == p.memory_per_slot_bytes


def test_state_splits_over_tp_and_fp8_halves_kv():
    one = decode_memory_per_slot_bytes("qwen3.6-35b-a3b", 4096)
    four = decode_memory_per_slot_bytes("qwen3.6-35b-a3b", 4096, tp=4)
    assert four["ssm"] == one["ssm"] / 4 and four["conv"] == one["conv"] / 4
    assert four["kv"] == one["kv"] / 2  # 2 KV heads over 4 GPUs: one head on each, replicated (vLLM's rule)
    fp8 = plan("qwen3-32b", tpot_s=PULL_TPOT_S, kv_dtype="fp8", **STUDY)
    assert fp8.kv_bytes == 4_194_304_000 // 2 and fp8.transfer_s == pytest.approx(10.48576e-3 / 2, rel=1e-12)


def test_transfer_adds_link_latency_once_and_divides_bytes_by_tp():
    link = dg.Link("custom", 8.0, latency_s=1e-3)  # 1 GB/s
    assert transfer_time_s(8e9, link, tp=8) == 1e-3 + 1.0
    assert transfer_time_s(0, "25g") == 0.0


# ------------------------------------------------------------------ link units


@pytest.mark.parametrize(
    "text, gbps",
    [("50GBps", 400.0), ("50GB/s", 400.0), (" 50 GBps ", 400.0), ("6.25GBps", 50.0), ("0.125GB/s", 1.0),
     ("125000GBps", 1e6),  # the gigabit limit, inclusive
     ("400gbps", 400.0), ("400Gbps", 400.0), ("50GBPS", 50.0), ("50gBps", 50.0)],  # every other spelling: gigabits
)
def test_gigabytes_and_gigabits_per_second(text, gbps):
    link = dg.load_link(text)
    assert link.bandwidth_gbps == gbps and link.bytes_per_s == gbps * 1e9 / 8
    assert dg.load_link(link.name) == link  # workloads record link.name; it must read back


def test_50_gbytes_per_second_is_the_400_gbit_link():
    assert dg.load_link("50GBps") == dg.load_link("400gbps") == dg.load_link("50GB/s")
    assert dg.load_link("50GBps").name == "400gbps"
    assert dg.load_link("50GBps").bytes_per_s == 50e9


@given(st.integers(0, 124_999), st.integers(0, 999), st.sampled_from(["GBps", "GB/s", " GBps "]))
def test_gbytes_parsing_reads_the_number_and_reads_back(whole, thousandths, unit):
    digits = f"{whole}.{thousandths:03d}"
    if whole == 0 and thousandths == 0:
        with pytest.raises(dg.ConfigError):
            dg.load_link(digits + unit)
        return
    link = dg.load_link(digits + unit)
    assert link.bandwidth_gbps == float(digits) * 8
    assert link.bytes_per_s == pytest.approx(float(digits) * 1e9, rel=1e-15)
    assert dg.load_link(link.name) == link
    assert len(link.name) <= len(digits) + 6  # scaling by 8 is exact, so the name stays short


@pytest.mark.parametrize("bad", ["0GBps", "125001GBps", "50 gb/s", "50Gb/s", "50GBs", "50 GB", "-5GBps", "nanGBps"])
def test_bad_gbytes_links_name_both_forms(bad):
    with pytest.raises(dg.ConfigError) as err:
        dg.load_link(bad)
    message = str(err.value)
    assert message.startswith("link: ") and repr(bad) in message
    assert "'<n>gbps' (gigabits/s" in message and "'<n>GBps' (gigabytes/s" in message


# ------------------------------------------------------------------ arguments


GOOD = dict(qps=8, prompt_tokens=16_000, out_tokens=128, tpot_s=PULL_TPOT_S, max_num_seqs=8)


@pytest.mark.parametrize(
    "change, field",
    [({"qps": 0}, "qps"), ({"qps": -1.0}, "qps"), ({"qps": float("nan")}, "qps"), ({"qps": "8"}, "qps"),
     ({"prompt_tokens": 0}, "prompt_tokens"), ({"prompt_tokens": 1.5}, "prompt_tokens"),
     ({"out_tokens": 0}, "out_tokens"), ({"out_tokens": True}, "out_tokens"),
     ({"tpot_s": 0.0}, "tpot_s"), ({"tpot_s": float("inf")}, "tpot_s"), ({"tpot_s": 10.4}, "tpot_s"),  # ms, not s
     ({"max_num_seqs": 0}, "max_num_seqs"), ({"max_num_seqs": 8.5}, "max_num_seqs"),
     ({"tp": 0}, "tp"), ({"tp": 2.5}, "tp"),
     ({"headroom": 0}, "headroom"), ({"headroom": 1.2}, "headroom"), ({"headroom": 80}, "headroom"),
     ({"gpu_memory_utilization": 0}, "gpu_memory_utilization"), ({"link": "fast"}, "link"),
     ({"gpu": "tpu"}, "gpu"), ({"kv_dtype": "fp7"}, "kv_dtype"), ({"model": "no-such-model"}, "model"),
     ({"prompt_tokens": 99_999_999, "out_tokens": 2}, "out_tokens")],
)
def test_bad_arguments_name_the_field(change, field):
    kwargs = {"model": "qwen3-32b", **GOOD, **change}
    with pytest.raises(dg.ConfigError, match=f"^{field}: "):
        plan(kwargs.pop("model"), **kwargs)


@pytest.mark.parametrize("call, field", [(lambda: slots_held(0, 128, 1e-3), "qps"),
                                         (lambda: slots_held(8, 0, 1e-3), "out_tokens"),
                                         (lambda: transfer_time_s(-1, "25g"), "nbytes"),
                                         (lambda: transfer_time_s(1, "25g", tp=0), "tp"),
                                         (lambda: decode_memory_per_slot_bytes("qwen3-32b", 0), "context_tokens")])
def test_the_small_functions_validate_too(call, field):
    with pytest.raises(dg.ConfigError, match=f"^{field}: "):
        call()


# ------------------------------------------------------------------ command line

CLI_STUDY = ["capacity", "qwen3-32b", "--qps", "8", "--prompt-tokens", "16000", "--out-tokens", "128",
             "--max-num-seqs", "8", "--tp", "8", "--link", "50GBps"]


def test_cli_json_contract(capsys):
    code, out, err = run(capsys, *CLI_STUDY, "--tpot-ms", "10.4", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert {"total_bytes", "transfer_s", "slots_held", "utilization", "fits"} <= set(data)
    assert data["total_bytes"] == 4_194_304_000 and data["transfer_s"] == pytest.approx(10.48576e-3, rel=1e-12)
    assert data["slots_held"] == pytest.approx(10.6496, rel=1e-12) and data["fits"] is False
    assert data["utilization"] == pytest.approx(10.6496 / 8, rel=1e-12)
    assert data["link"] == "400gbps" and data["status"] == "over_capacity"
    assert data == plan("qwen3-32b", tpot_s=PULL_TPOT_S, **STUDY).to_dict()


def test_cli_table_shows_the_numbers_and_the_verdict(capsys):
    code, out, _ = run(capsys, *CLI_STUDY, "--tpot-ms", "7.0")
    assert code == 0
    assert "4.19 GB" in out and "10.49 ms" in out and "7.17" in out and "utilisation 90%" in out
    assert "verdict: tight: 7.2 of 8 slots held (90%)" in out
    assert "advice: raise max_num_seqs to 9 (+1 slot," in out


def test_cli_link_forms_agree(capsys):
    results = []
    for link in ("50GBps", "400gbps", "50GB/s"):
        _, out, _ = run(capsys, *CLI_STUDY, "--tpot-ms", "7", "--link", link, "--json")
        results.append(json.loads(out))
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize(
    "extra, field",
    [(["--tpot-ms", "0"], "--tpot-ms"), (["--tpot-ms", "-7"], "--tpot-ms"), (["--tpot-ms", "slow"], "--tpot-ms"),
     (["--tpot-ms", "7", "--qps", "0"], "--qps"), (["--tpot-ms", "7", "--headroom", "1.5"], "--headroom"),
     (["--tpot-ms", "7", "--headroom", "0"], "--headroom"), (["--tpot-ms", "7", "--tp", "0"], "--tp"),
     (["--tpot-ms", "7", "--tp", "two"], "--tp"), (["--tpot-ms", "7", "--max-num-seqs", "0"], "--max-num-seqs"),
     (["--tpot-ms", "7", "--max-num-seqs", "8.5"], "--max-num-seqs"), (["--tpot-ms", "7", "--link", "50 gb/s"], "link"),
     (["--tpot-ms", "7", "--gpu", "tpu"], "gpu"), (["--tpot-ms", "7", "--kv-dtype", "fp7"], "kv_dtype"),
     (["--tpot-ms", "7", "--gpu-memory-utilization", "2"], "--gpu-memory-utilization"),
     ([], "--tpot-ms")],  # required
)
def test_cli_bad_input_is_one_line_naming_the_flag(capsys, extra, field):
    argv = [*CLI_STUDY, *extra]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses unparsable values itself, also with status 2
        code = exc.code
    assert code == 2
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert field in lines[0] and "Traceback" not in err


def test_cli_bad_prompt_tokens_and_model(capsys):
    at = CLI_STUDY.index("--prompt-tokens") + 1
    for argv, field in (([*CLI_STUDY[:at], "0", *CLI_STUDY[at + 1:], "--tpot-ms", "7"], "--prompt-tokens"),
                        (["capacity", "nope", *CLI_STUDY[2:], "--tpot-ms", "7"], "model")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and field in err


def test_prefill_and_decode_tp_apart():
    base = plan("qwen3-32b", qps=8, prompt_tokens=16_000, out_tokens=128, tpot_s=7e-3, max_num_seqs=8, tp=8)
    same = plan("qwen3-32b", qps=8, prompt_tokens=16_000, out_tokens=128, tpot_s=7e-3, max_num_seqs=8,
                prefill_tp=8, decode_tp=8)
    assert same.transfer_s == base.transfer_s and same.max_slots_in_memory == base.max_slots_in_memory
    split = plan("qwen3-32b", qps=8, prompt_tokens=16_000, out_tokens=128, tpot_s=7e-3, max_num_seqs=8,
                 prefill_tp=4, decode_tp=8)
    assert split.total_bytes == base.total_bytes  # the decode side's shards
    assert split.transfer_s == pytest.approx(1.26e-6 + base.total_bytes / 4 / 50e9, rel=1e-12)  # four NICs at once
    assert split.max_slots_in_memory == base.max_slots_in_memory  # memory is the decode side's
    assert (split.prefill_tp, split.decode_tp) == (4, 8)
