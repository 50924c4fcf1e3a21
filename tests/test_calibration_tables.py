"""The hardware tables of docs/calibration.md are what depgraph computes now, row by row."""

from pathlib import Path

import pytest

import depgraph as dg

DOC = (Path(__file__).parents[1] / "docs" / "calibration.md").read_text(encoding="utf-8")


def _rows(header_start: str) -> list[list[str]]:
    lines = DOC.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header_start))
    out = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        out.append([c.strip() for c in line.strip("|").split("|")])
    return out


def test_the_figure4_point_on_each_gpu():
    rows = _rows("| GPU | link | MFU | HBM eff. |")
    assert len(rows) == 16
    for gpu, link, mfu, eff, *ttfts, vs_ctm, vs_global in rows:
        G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link=link, gpu=gpu, mfu=float(mfu))
        assert dg.CostModel(gpu=gpu).decode_hbm_efficiency == float(eff)
        t = [dg.schedule(G, policy=p).ttft_s * 1e3 for p in dg.POLICY_NAMES]
        assert [f"{x:.2f}" for x in t] == ttfts
        assert f"{100 * (1 - t[2] / t[0]):.1f}%" == vs_ctm and f"{100 * (1 - t[2] / t[1]):.1f}%" == vs_global


@pytest.mark.parametrize("row", _rows("| GPU | TP (both sides) |"), ids=lambda r: f"{r[0]}-tp{r[1]}")
def test_the_16k_qwen3_32b_handoff_at_each_tp(row):
    gpu, tp, kv_rank, transfer_ms, *rest = row
    tp = int(tp)
    m = dg.load_model("qwen3-32b")
    assert dg.handoff_bytes_per_rank(m, prompt_tokens=16384, tp=tp)["kv"] == int(kv_rank.replace(",", ""))
    G = dg.single_request(m, prompt_tokens=16384, gpu=gpu, prefill_tp=tp, decode_tp=tp)
    t = {p: dg.schedule(G, policy=p) for p in dg.POLICY_NAMES}
    assert [f"{t[p].ttft_s * 1e3:.1f}" for p in dg.POLICY_NAMES] == rest[:4]
    assert f"{t['layer'].breakdown().get('collective_s', 0.0) * 1e3:.1f}" == rest[4]


@pytest.mark.parametrize("row", _rows("| TP x PP (each side) |"), ids=lambda r: r[0].replace(" ", ""))
def test_the_16k_qwen3_32b_handoff_cut_into_tp_and_pp(row):
    split, events, prefill_ms, handoff_ms, step_ms, *ttfts = row
    tp, pp = (int(x) for x in split.split(" x "))
    m = dg.load_model("qwen3-32b")
    cost = dg.CostModel(prefill_tp=tp, decode_tp=tp, prefill_pp=pp, decode_pp=pp)
    G = dg.single_request(m, prompt_tokens=16384, cost=cost)
    assert G.number_of_nodes() == int(events)
    assert f"{cost.prefill_side_s(m, 16384) * 1e3:.1f}" == prefill_ms
    assert f"{cost.handoff_s(m, 16384) * 1e3:.2f}" == handoff_ms
    assert f"{cost.decode_side_step_s(m, 16384) * 1e3:.2f}" == step_ms
    assert [f"{dg.schedule(G, policy=p).ttft_s * 1e3:.1f}" for p in dg.POLICY_NAMES] == ttfts
