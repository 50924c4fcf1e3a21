"""The main job end to end, on a small scenario pair: files, claims, resume, determinism."""

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from depgraph.studies.claims import CLAIMS, REPLAY_CLAIMS
from depgraph.studies.reproduce import write_reproduction

SINGLE = """name = "single"
[grid]
models = ["qwen3.6-35b-a3b"]
prompt_tokens = [1024]
links = ["25g"]
gpus = ["study-effective"]
mfus = [0.4]
timings = ["handoff"]
[[workloads]]
workload = "single"
"""

REPLAY = SINGLE.replace('name = "single"', 'name = "replay"').replace(
    '[[workloads]]\nworkload = "single"\n',
    '[[workloads]]\nworkload = "batch"\nbatch = [8]\n[[workloads]]\nworkload = "speculative"\n')


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    scen = tmp_path_factory.mktemp("scenarios")
    (scen / "single.toml").write_text(SINGLE)
    (scen / "replay.toml").write_text(REPLAY)
    out = tmp_path_factory.mktemp("results")
    report = write_reproduction(out, scenarios=scen, workers=1, show_bars=False)
    return scen, out, report


def _digest(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and ".parts" not in p.parts and p.suffix in (".csv", ".md")}


def test_writes_tables_figures_and_report(run):
    _, out, report = run
    assert report == out / "report.md"
    for name in ("single.csv", "single.parquet", "replay.csv", "replay.parquet", "tables/claims.csv",
                 "tables/replay_gains.csv", "tables/figure9.csv", "figures/fig4_gains.png",
                 "figures/fig9_step_boundary.png", "figures/fig6_max_gains.png", "figures/fig5_batch.svg"):
        assert (out / name).is_file(), name
    text = report.read_text()
    assert "Claims, the study's value next to ours" in text and "Figure 9" in text
    assert not list(out.rglob("*.tmp"))  # nothing half-written


def test_replay_table_contract(run):
    _, out, _ = run
    replay = pd.read_csv(out / "replay.csv")
    for col in ("key", "model", "prompt_tokens", "link", "mfu", "timing", "workload", "variant", "policy",
                "admission", "ttft_s", "frontier_max", "stall_s"):
        assert col in replay.columns
    assert set(replay.admission) == {"step", "async", "none"}
    assert replay.key.nunique() == 2


def test_claims_cover_both_studies_and_say_what_is_missing(run):
    _, out, _ = run
    claims = pd.read_csv(out / "tables/claims.csv")
    assert len(claims) == len(CLAIMS) + len(REPLAY_CLAIMS)
    # a figure this small sweep cannot reach is reported as missing, not invented
    missing = claims[claims.depgraph.isna()]
    assert len(missing) and not missing.matched.any()
    f9 = claims.set_index("claim").loc["fig9.global.c8"]
    assert f9.matched  # 88 ms: computed from this sweep's one c = 8 point


def test_rerun_resumes_and_is_byte_identical(run, tmp_path):
    scen, out, _ = run
    before = _digest(out)
    write_reproduction(out, scenarios=scen, workers=1, show_bars=False)
    assert _digest(out) == before


def _browser():
    import os
    import shutil

    found = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if found is None:
        if os.environ.get("DEPGRAPH_REQUIRE_BROWSER"):
            pytest.fail("no headless Chromium: ./run.sh test installs it (apt-get install chromium)")
        pytest.skip("no headless Chromium here (./run.sh test installs it)")
    return found


def test_report_html_opens_in_a_real_browser(run, tmp_path):
    """report.html is one self-contained page: a headless Chromium loads it with no console message, every
    figure of report.md is inline, the claims table has every claim with a link to its figure, sorting and
    filtering run (the page's self-test), and a screenshot is taken."""
    import re
    import subprocess

    _, out, _ = run
    page = out / "report.html"
    text = page.read_text()
    assert "http://" not in text and "https://" not in text and 'src="figures/' not in text  # nothing outside
    claims = pd.read_csv(out / "tables" / "claims.csv")
    browser = _browser()
    args = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
            "--virtual-time-budget=5000"]
    dom = subprocess.run(args + ["--dump-dom", page.as_uri() + "#selftest"], capture_output=True, text=True,
                         timeout=120)
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    html = dom.stdout
    assert 'data-ready="yes"' in html
    rows = re.findall(r'<tr id="claim-([^"]+)" data-matched="(yes|no)"', html)
    assert sorted(c for c, _ in rows) == sorted(claims.claim)
    missed = int((~claims.matched.astype(bool)).sum())
    selftest = re.search(r'data-selftest="([^"]*)"', html).group(1)
    assert selftest == f"claim-{max(claims.claim)}|{missed} of {len(claims)} claims shown"  # sorted down, filtered
    md = (out / "report.md").read_text()
    for name in re.findall(r"!\[[^\]]*\]\(figures/([^)]+)\)", md):
        anchor = "fig-" + re.sub(r"[^a-z0-9]+", "-", name.rsplit(".", 1)[0].lower()).strip("-")
        assert re.search(rf'<figure id="{anchor}"><img alt="[^"]*" src="data:image/', html), name
    for claim in claims.claim:  # each claim links to the figure it comes from, and back
        from depgraph.studies.report import claim_source

        figure = claim_source(claim)[2]
        if figure and (out / "figures" / figure).exists():
            assert f'href="#claim-{claim}"' in html
    shot = tmp_path / "report.png"
    subprocess.run(args + [f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri()], capture_output=True,
                   timeout=120)
    assert shot.stat().st_size > 10_000
    # in a 1,400 px window the claims table fits (its long cells wrap) and nothing widens the page
    wide = subprocess.run(args + ["--window-size=1400,2000", "--dump-dom", page.as_uri() + "#selftest"],
                          capture_output=True, text=True, timeout=120).stdout
    right, window, page_width = map(int, re.search(r'data-widths="(\d+)/(\d+)/(\d+)"', wide).groups())
    assert right <= window and page_width <= window, (right, window, page_width)


def test_the_matched_column_styles_fit_apart_from_a_miss(tmp_path):
    """A fit is matched (the "matched" filter shows it, "missed" does not) and has its own style, not the red
    bold of a miss; a legend above the claims table says what yes, fit and no mean."""
    import re

    from depgraph.studies.report import _claims_section
    from depgraph.studies.report_html import STATUSES, _STYLE, report_html

    row = dict(text="t", unit="ms", study=1.0, depgraph=1.0, difference=0.0, tolerance=0.1, reason="")
    claims = pd.DataFrame([dict(row, claim="fig4.a", matched=True, fit=False),
                           dict(row, claim="fig4.b", matched=True, fit=True, reason="the calibration point"),
                           dict(row, claim="fig4.c", matched=False, fit=False, depgraph=2.0, reason="too slow")])
    md = _claims_section({"single": pd.DataFrame({"a": [1]}), "replay": pd.DataFrame({"a": [1]})}, claims)
    html = report_html(md, tmp_path, claims)
    for claim, matched, status in (("a", "yes", "yes"), ("b", "yes", "fit"), ("c", "no", "no")):
        assert f'<tr id="claim-fig4.{claim}" data-matched="{matched}" data-status="{status}">' in html
        assert f'<td class="status status-{status}">{status}</td>' in html
    rules = {k: re.search(rf"\.status-{k} {{([^}}]*)}}", _STYLE).group(1) for k in STATUSES}
    assert "#b00" in rules["no"] and "bold" in rules["no"]
    assert "bold" not in rules["fit"] and "#b00" not in rules["fit"] and rules["fit"] != rules["yes"]
    legend = re.search(r'<p id="claims-legend"[^>]*>(.*?)</p>', html).group(1)
    assert all(f'class="status status-{k}">{k}</span>' in legend for k in STATUSES)
    assert html.index('id="claims-legend"') < html.index('<table id="claims"')
    assert '<option value="fit">' in html


def test_a_claim_text_with_a_bar_or_a_line_break_stays_in_its_cells(tmp_path):
    from depgraph.studies.report import _claims_section, _num
    from depgraph.studies.report_html import report_html

    claims = pd.DataFrame([dict(claim="fig4.a", text="TTFT | gain\nat < 5%", unit="ms", study=1.0, depgraph=1.02,
                                difference=0.02, tolerance=0.05, matched=True, reason="see docs/calibration.md")])
    md = _claims_section({"single": pd.DataFrame({"a": [1]}), "replay": pd.DataFrame({"a": [1]})}, claims)
    html = report_html(md, tmp_path, claims)
    assert '<tr id="claim-fig4.a" data-matched="yes" data-status="yes">' in html and "TTFT | gain at &lt; 5%" in html
    assert "1 match within the stated tolerance, 0 more" in md  # a reason naming the doc is not a fit
    assert [_num(v) for v in (4e-5, -0.0, 262144.0)] == ["0.00004", "0", "262144"] and _num(-0.0, signed=True) == "+0"


def test_every_study_figure_title_names_the_model_gpu_link_and_mfu(run):
    """Figures 4, 6, 7, 8 and 9 read the model, GPU, link and MFU they show from the tables they draw."""
    from depgraph.studies.replay import figure9_numbers, plot_fig6, plot_fig7, plot_fig8, plot_fig9, replay_gains
    from depgraph.studies.single import plot_gains, study_gains

    _, out, _ = run
    single, replay = pd.read_parquet(out / "single.parquet"), pd.read_parquet(out / "replay.parquet")
    want = ("qwen3.6-35b-a3b", "GPU study-effective", "link 25g", "MFU 0.4")
    fig4 = plot_gains(study_gains(single), gpu=list(single.gpu.unique()))
    gains = replay_gains(replay)
    titles = {"4": fig4.axes[0].get_title(), "9": plot_fig9(figure9_numbers(replay))._suptitle.get_text(),
              **{k: f(gains).axes[0].get_title() for k, f in (("6", plot_fig6), ("7", plot_fig7), ("8", plot_fig8))}}
    for figure, title in titles.items():
        assert f"Figure {figure}" in title
        for words in want:
            assert words in title, (figure, words, title)


def test_figure7_draws_the_component_gain_where_it_can_be_seen(run):
    """Component vs layer is a fraction of a percent: a box of it is a flat line at 0, hidden under the
    median line (Figure 7's red series was in the legend and nowhere else). It is drawn as red points on
    top of everything, its largest value written above them, and the medians are black."""
    from matplotlib.colors import to_hex

    from depgraph.studies.replay import plot_fig7, replay_gains

    _, out, _ = run
    gains = replay_gains(pd.read_parquet(out / "replay.parquet"))
    ax = plot_fig7(gains).axes[0]
    red = [c for c in ax.collections if len(c.get_offsets()) and to_hex(c.get_facecolor()[0]) == "#d62728"]
    assert len(red) == gains[(gains.mfu == 0.4) & (gains.admission != "async")].variant.map(lambda v: v[0]).nunique()
    assert sum(len(c.get_offsets()) for c in red) == int(
        gains[(gains.mfu == 0.4) & (gains.admission != "async")].component_vs_layer.notna().sum())
    others = [p.get_zorder() for p in ax.patches] + [line.get_zorder() for line in ax.lines]
    assert all(c.get_zorder() > max(others) for c in red)
    assert any(t.get_text().startswith("max ") and t.get_color() == "#d62728" for t in ax.texts)
    assert "#ff7f0e" not in {to_hex(line.get_color()) for line in ax.lines}  # orange medians: no series is orange
    assert "component vs layer" in " ".join(t.get_text() for t in ax.get_legend().get_texts())
