"""The single-request study: every figure the study reports, as numbers.

The sweep runs once per test session (a few seconds) and every claim reads it.
"""

import pandas as pd
import pytest

import depgraph as dg
from depgraph.studies.claims import CLAIMS, evaluate_claims, study_context
from depgraph.studies.single import conv_head_start, single_request_sweep, study_gains


@pytest.fixture(scope="module")
def ctx():
    return study_context()


def test_grid_is_the_studys(ctx):
    # 2 models x 3 prompts x 3 links x 2 MFU x 2 timings = 72 configurations, 4 policies each
    assert len(ctx["gains"]) == 72
    assert len(ctx["sweep"]) == 288
    assert set(ctx["sweep"].policy) == set(dg.POLICY_NAMES)


def test_policies_ordered_on_every_configuration(ctx):
    g = ctx["gains"]
    slack = 1 + 1e-12  # float rounding only: a coarser policy adds edges, so it can never finish earlier
    assert (g.ttft_component_s <= g.ttft_layer_s * slack).all()
    assert (g.ttft_layer_s <= g.ttft_global_s * slack).all()
    assert (g.ttft_global_s <= g.ttft_compute_then_move_s * slack).all()


def test_migration_global_equals_compute_then_move(ctx):
    g = ctx["gains"][ctx["gains"].timing == "migration"]
    assert (g.ttft_global_s == g.ttft_compute_then_move_s).all()


def test_component_vs_layer_near_zero(ctx):
    # The study: at most 0.053%. Ours 0.054%; allow 0.01 points (the conv operator's
    # share of a layer bounds it; both figures are that bound on slightly different decode costs).
    worst = ctx["gains"].component_vs_layer.max()
    assert 0.00043 <= worst <= 0.00063
    # and it is not identically zero: the conv operator can start early on recurrent layers
    assert (ctx["gains"].component_vs_layer > 0).any()


def test_figure4_calibration_point(ctx):
    g = ctx["gains"]
    row = g[(g.model == "qwen3.6-35b-a3b") & (g.prompt_tokens == 1024) & (g.link == "25g") & (g.mfu == 1.0)
            & (g.timing == "handoff")].iloc[0]
    # The study: 47% and 16.5%. The device speed is calibrated on this point (docs/calibration.md);
    # half a point covers the study's rounding.
    assert row.layer_vs_ctm == pytest.approx(0.47, abs=0.005)
    assert row.layer_vs_global == pytest.approx(0.165, abs=0.005)


def test_layer_vs_ctm_large_on_25g(ctx):
    g = ctx["gains"][ctx["gains"].link == "25g"]
    # The study: up to 47% (the report's tolerance 2.5 points), and still 31% at MFU 0.4 (a documented miss:
    # ours 37.5%, the decode pass after the last arrival; tests/test_claims.py holds it to the report's verdict).
    assert abs(g.layer_vs_ctm.max() - 0.47) <= 0.025
    assert g[g.mfu == 0.4].layer_vs_ctm.max() > 0.31 + 0.02


def test_layer_vs_global_clears_15_only_at_mfu1(ctx):
    g = ctx["gains"]
    over = g[g.layer_vs_global > 0.15]
    # The study: only MFU 1.0 on 25G clears 15%. Ours: MFU 1.0 only, but on every link
    # (documented miss). The MFU half of the claim holds.
    assert set(over.mfu) == {1.0}
    assert (over.prompt_tokens == 1024).all()


def test_conv_head_start_about_16us():
    hs = conv_head_start("qwen3.6-35b-a3b", link="25g")
    # 49,152 B at 3.125 GB/s = 15.73 µs; the study says "about 16 µs".
    assert hs["conv_bytes"] == 49_152
    assert hs["conv_transfer_s"] == pytest.approx(15.73e-6, abs=0.01e-6)
    # what it can buy is bounded by the conv operator (10% of a recurrent layer's decode step)
    assert 0 < hs["conv_op_s"] < hs["arrival_gap_s"]
    assert hs["realised_s"] == pytest.approx(hs["arrival_gap_s"], rel=1e-9)


def test_claims_table_is_complete_and_honest(ctx):
    table = evaluate_claims(ctx)
    assert len(table) == len(CLAIMS)
    # every miss says why
    assert (table[~table.matched].reason.str.len() > 20).all()
    must_match = [c.key for c in CLAIMS if c.key.startswith(("fig3.", "bytes.", "transfer.", "fig4.conv"))]
    assert table.set_index("claim").loc[must_match, "matched"].all()


def test_sweep_is_deterministic():
    kw = dict(models=["nemotron-3-nano-30b-a3b"], prompts=[1024], links=["25g", "100g"], mfus=[0.4])
    a, b = single_request_sweep(**kw), single_request_sweep(**kw)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert study_gains(a).equals(study_gains(b))
