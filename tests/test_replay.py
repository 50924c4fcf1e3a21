"""The replay's claims on a representative slice (1k prompts, 25G, both models, both MFUs, all
nine workload variants: 36 points); the full 648 points run in `./run.sh reproduce`."""

import itertools

import pandas as pd
import pytest

from depgraph.sweeps.points import run_point
from depgraph.studies.replay import family_summary, replay_gains

VARIANTS = [("speculative", "k=3", {"spec_k": 3}), ("batch", "c=8", {"batch": 8}), ("batch", "c=32", {"batch": 32}),
            ("interleaved", "K=4", {"interleave": 4}), ("interleaved", "K=16", {"interleave": 16}),
            ("pipeline", "pp2-private", {"stages": 2, "shared_link": False}),
            ("pipeline", "pp2-shared", {"stages": 2, "shared_link": True}),
            ("pipeline", "pp4-private", {"stages": 4, "shared_link": False}),
            ("pipeline", "pp4-shared", {"stages": 4, "shared_link": True})]


@pytest.fixture(scope="module")
def gains():
    rows = []
    for model, mfu, (workload, variant, kw) in itertools.product(
            ("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b"), (0.4, 1.0), VARIANTS):
        point = {"model": model, "prompt_tokens": 1024, "link": "25g", "gpu": "study-effective", "mfu": mfu,
                 "timing": "handoff", "workload": workload, "variant": variant, **kw}
        key = "|".join(str(point[k]) for k in ("model", "prompt_tokens", "link", "gpu", "mfu", "timing", "workload",
                                               "variant"))
        rows += [{**point, "key": key, **r} for r in run_point(point)]
    return replay_gains(pd.DataFrame(rows))


def test_policies_ordered_except_a_list_scheduling_anomaly(gains):
    slack = 1 + 1e-12
    assert (gains.ttft_component_s <= gains.ttft_layer_s * slack).all()
    assert (gains.ttft_layer_s <= gains.ttft_global_s * slack).all()
    ok = gains.ttft_global_s <= gains.ttft_compute_then_move_s * slack
    # One anomaly, and only there: K requests on one FIFO link. A streaming producer makes every
    # request's sends ready layer by layer at the same moments, so the link interleaves them and
    # every request finishes near the end; compute-then-move makes each request's sends ready at
    # once, ties go to the lower request, and requests finish one after another: a lower mean TTFT.
    assert set(gains[~ok].variant) <= {"K=4", "K=16"} and "K=16" in set(gains[~ok].variant)
    assert (gains[~ok].timing == "handoff").all()


def test_component_vs_layer_median_zero_and_max_small(gains):
    s = family_summary(gains)
    # The study: every group's median 0.00% (two decimals); ours over the full grid at most 0.003%.
    # This slice is the 1k/25G corner, where the conv tail's head start weighs most: below 0.1%.
    assert (s.component_vs_layer_median < 0.001).all()
    assert s.component_vs_layer_max.max() < 0.02
    # with async admission on both, within 0.34%
    assert gains.async_component_vs_layer.max() < 0.0034


def test_layer_vs_global_shape(gains):
    s = family_summary(gains)
    # Continuous batching: the study's maxima 37 to 38%; ours 35.8% and 38.2% on the full grid,
    # both at a 1k/25G point, so this slice holds them: 2 points either side.
    assert 0.35 <= s.loc["c=8", "layer_vs_global_max"] <= 0.40
    assert 0.36 <= s.loc["c=32", "layer_vs_global_max"] <= 0.40
    # Every family gains from per-layer readiness at its best point (the study: 23% to 47.5%; ours
    # 13% to 21%, a documented miss: docs/calibration.md).
    for v in ("k=3", "pp2-private", "pp4-shared"):
        assert s.loc[v, "layer_vs_global_max"] > 0.10
    # On a shared 25G link the requests' bytes dilute it (8.5% and 2.3% here; 21% and 15% at best
    # on the full grid, on faster links).
    assert s.loc["K=4", "layer_vs_global_max"] > 0.05 and s.loc["K=16", "layer_vs_global_max"] > 0.01


def test_async_beats_step_admission_on_batching(gains):
    b = gains[gains.variant.isin(["c=8", "c=32"]) & (gains.admission == "step")]
    # request-level async never loses (it has no boundary to wait for) and at 1k wins a lot
    assert (b.async_vs_layer >= 0).all()
    assert b.async_vs_layer.max() > 0.3
