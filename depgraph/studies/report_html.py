"""``report.html``: the reproduction report as one self-contained page.

The same text as ``report.md`` (rendered from its Markdown: headings,
paragraphs, lists, tables, bold, code and images), with every figure and
drawing inline (PNG and SVG as data URIs, so the file opens anywhere on its
own), the claims table sortable (click a header) and filterable (a text box
and a matched / missed choice), and links both ways between each claim and
the figure it comes from (``source`` column: our figure for it; under each
figure, the claims it carries). No network, no external script.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pandas as pd

from .report import claim_source

__all__ = ["report_html"]

_IMG = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")
_INLINE = [(re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"), (re.compile(r"`([^`]+)`"), r"<code>\1</code>")]
#: The largest figure inlined (a bigger one is linked instead, named in the page).
MAX_INLINE_BYTES = 8 * 1024 * 1024


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    for pattern, repl in _INLINE:
        out = pattern.sub(repl, out)
    return out


def _anchor(name: str) -> str:
    return "fig-" + re.sub(r"[^a-z0-9]+", "-", Path(name).stem.lower()).strip("-")


def _figure(path: Path, alt: str, carried: list[str]) -> str:
    name = path.name
    if not path.is_file():
        body = f'<p class="missing">figure {html.escape(name)} was not written</p>'
    elif path.stat().st_size > MAX_INLINE_BYTES:
        body = f'<p><a href="figures/{html.escape(name)}">{html.escape(name)}</a> (too large to inline)</p>'
    else:
        mime = "image/svg+xml" if path.suffix.lower() == ".svg" else "image/png"
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        body = f'<img alt="{html.escape(alt)}" src="data:{mime};base64,{data}">'
    links = ""
    if carried:
        links = ('<p class="carried">claims from this figure: '
                 + ", ".join(f'<a href="#claim-{html.escape(c)}">{html.escape(c)}</a>' for c in carried) + "</p>")
    return f'<figure id="{_anchor(name)}">{body}<figcaption>{html.escape(alt)} ({html.escape(name)})</figcaption>' \
           f"{links}</figure>"


#: The claims table's ``matched`` values (report.md writes a miss as ``**no**``): what each means, for the
#: legend above the table, and its style (``.status-<value>`` in the page's CSS).
STATUSES = {
    "yes": "matched: our value is within the stated tolerance of the study's",
    "fit": "matched because a value was fitted to this claim: it reproduces its own figure by construction, "
           "so the summary counts it apart",
    "no": "missed: outside the tolerance; the reason column says why",
}
#: The claims table's column widths (its layout is fixed, so that it fits the page: long cells wrap).
_CLAIM_WIDTHS = {"claim": 13, "source": 10, "text": 15, "unit": 4.5, "study": 6, "depgraph": 7,
                 "difference": 7.5, "tolerance": 6.5, "matched": 6.5, "reason": 24}


def _cell(text: str) -> str:
    """A table cell's text: inline Markdown, with a break allowed after each ``_`` and ``|`` of a long
    identifier (``replay_summary``'s column names, a point's key) and each ``+`` between words
    (``capacity+queue``), so that a wide table can wrap."""
    out = _inline(text)
    return re.sub(r"(?<=[_|])(?=[^<>\s])|(?<=[a-z]\+)(?=[a-z])", "<wbr>", out) if len(text) > 12 else out


def _status(cell: str) -> str:
    value = cell.strip().strip("*").strip()
    return value if value in STATUSES else "no"


def _table(rows: list[list[str]], *, claims: bool) -> str:
    head, body = rows[0], rows[1:]
    attrs = ' id="claims" class="claims"' if claims else ""
    cols = ""
    if claims:
        total = sum(_CLAIM_WIDTHS.get(c, 8) for c in head)
        cols = "<colgroup>" + "".join(f'<col class="col-{html.escape(c)}" style="width:{100 * _CLAIM_WIDTHS.get(c, 8) / total:.1f}%">'
                                      for c in head) + "</colgroup>"
    out = [f"<table{attrs}>{cols}<thead><tr>" + "".join(f"<th>{_cell(c)}</th>" for c in head) + "</tr></thead><tbody>"]
    for row in body:
        if claims:
            claim = row[0]
            _, _, figure = claim_source(claim)
            status = _status(row[head.index("matched")])
            matched = "no" if status == "no" else "yes"  # a fit is matched (counted apart)
            cells = []
            for name, cell in zip(head, row):
                if name == "source" and figure:
                    cells.append(f'<td><a href="#{_anchor(figure)}">{_cell(cell)}</a></td>')
                elif name == "matched":
                    cells.append(f'<td class="status status-{status}">{html.escape(status)}</td>')
                elif name == "claim":  # an id: it may break after each dot as well
                    cells.append("<td>" + _cell(cell).replace(".", ".<wbr>") + "</td>")
                else:
                    cells.append(f"<td>{_cell(cell)}</td>")
            out.append(f'<tr id="claim-{html.escape(claim)}" data-matched="{matched}" data-status="{status}">'
                       + "".join(cells) + "</tr>")
        else:
            out.append("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    table = "\n".join(out)
    # the claims table fits the page (fixed layout, wrapping cells); another table too wide for it scrolls
    # inside its own box rather than widening the page
    return table if claims else f'<div class="wide">{table}</div>'


def _legend() -> str:
    """The line above the claims table that says what each ``matched`` value means, in its own style."""
    return ('<p id="claims-legend" class="legend">matched: '
            + "; ".join(f'<span class="status status-{k}">{k}</span> {html.escape(v)}' for k, v in STATUSES.items())
            + ".</p>")


def _markdown(text: str, out_dir: Path, carried: dict[str, list[str]]) -> str:
    """Our report's Markdown as HTML (the subset report.md uses)."""
    blocks: list[str] = []
    lines = text.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            blocks.append("<p>" + _inline(" ".join(para)) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip():
            flush()
            i += 1
            continue
        if line.startswith("#"):
            flush()
            level = len(line) - len(line.lstrip("#"))
            title = line[level:].strip()
            anchor = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]
            blocks.append(f'<h{level} id="{anchor}">{_inline(title)}</h{level}>')
            i += 1
            continue
        m = _IMG.match(line.strip())
        if m:
            flush()
            name = Path(m.group(2)).name
            blocks.append(_figure(out_dir / m.group(2), m.group(1), carried.get(name, [])))
            i += 1
            continue
        if line.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip().replace("\\|", "|")
                         for c in re.split(r"(?<!\\)\|", lines[i].strip()[1:-1] if lines[i].strip().endswith("|")
                                           else lines[i].strip()[1:])]
                if not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            blocks.append(_table(rows, claims=bool(rows) and rows[0][:2] == ["claim", "source"]))
            continue
        if line.lstrip().startswith(("- ", "* ")) or re.match(r"^\d+\. ", line):
            flush()
            ordered = bool(re.match(r"^\d+\. ", line))
            items = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|")):
                item = lines[i].strip()
                if re.match(r"^(- |\* |\d+\. )", item):
                    items.append(re.sub(r"^(- |\* |\d+\. )", "", item))
                elif items:
                    items[-1] += " " + item
                i += 1
            tag = "ol" if ordered else "ul"
            blocks.append(f"<{tag}>" + "".join(f"<li>{_inline(x)}</li>" for x in items) + f"</{tag}>")
            continue
        para.append(line.strip())
        i += 1
    flush()
    return "\n".join(blocks)


_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; }
th { background: #f3f3f3; }
div.wide { max-width: 100%; overflow-x: auto; } div.wide table { margin: 0; }
table.claims { table-layout: fixed; width: 100%; }
table.claims td { overflow-wrap: anywhere; }
table.claims th { cursor: pointer; user-select: none; }
.status-yes { color: #1a7f37; }
.status-fit { color: #1f5fa8; font-style: italic; }
.status-no { color: #b00; font-weight: bold; }
p.legend { font-size: 13px; color: #444; margin: .3em 0; }
p.legend .status { padding: 0 2px; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 13px; } .carried { font-size: 13px; }
code { background: #f5f5f5; padding: 0 3px; } #filters { margin: .5em 0; }
:target { outline: 3px solid #f0c000; }
"""

_SCRIPT = """
(function () {
  var table = document.getElementById("claims");
  if (!table) { document.body.dataset.ready = "no-claims"; return; }
  var body = table.tBodies[0];
  var text = document.getElementById("claim-filter"), which = document.getElementById("claim-matched");
  var shown = document.getElementById("claim-count");
  function filter() {
    var q = text.value.toLowerCase(), m = which.value, n = 0;
    Array.prototype.forEach.call(body.rows, function (row) {
      var ok = (!q || row.textContent.toLowerCase().indexOf(q) >= 0)
        && (m === "all" || row.dataset.matched === m || row.dataset.status === m);
      row.style.display = ok ? "" : "none";
      if (ok) { n += 1; }
    });
    shown.textContent = n + " of " + body.rows.length + " claims shown";
  }
  function key(cell) {
    var t = cell.textContent.trim(), v = parseFloat(t.replace(/^[+\\u00b1]/, ""));
    return isNaN(v) || !/^[+\\u00b1-]?[0-9.]+$/.test(t) ? t.toLowerCase() : v;
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.title = "sort by " + th.textContent;
    th.addEventListener("click", function () {
      var up = th.dataset.order !== "up";
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { delete c.dataset.order; });
      th.dataset.order = up ? "up" : "down";
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a.cells[col]), y = key(b.cells[col]);
        if (typeof x !== typeof y) { x = String(x); y = String(y); }
        return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  text.addEventListener("input", filter);
  which.addEventListener("change", filter);
  filter();
  if (location.hash === "#selftest") {  // exercised by the test suite in a headless browser
    var root = document.documentElement;  // the claims table's right edge, the window's width, the page's
    document.body.dataset.widths = Math.ceil(table.getBoundingClientRect().right) + "/" + root.clientWidth + "/"
      + root.scrollWidth;
    table.tHead.rows[0].cells[0].click();
    table.tHead.rows[0].cells[0].click();
    var first = body.rows[0].id;
    which.value = "no";
    filter();
    document.body.dataset.selftest = first + "|" + shown.textContent;
  }
  document.body.dataset.ready = "yes";
})();
"""


def report_html(markdown_text: str, out_dir: str | Path, claims: pd.DataFrame) -> str:
    """The page: ``markdown_text`` (``report.md``) rendered, figures from ``out_dir`` inlined."""
    out_dir = Path(out_dir)
    carried: dict[str, list[str]] = {}
    for claim in claims.claim:
        _, _, figure = claim_source(claim)
        if figure:
            carried.setdefault(figure, []).append(claim)
    body = _markdown(markdown_text, out_dir, carried)
    # every figure a claim names, and every other figure and drawing the run wrote, is on the page too
    shown = set(re.findall(r'<figure id="([^"]+)"', body))
    names = list(carried) + sorted(p.name for p in (out_dir / "figures").glob("*")
                                   if p.suffix.lower() in (".png", ".svg") and p.name not in carried)
    extra = [_figure(out_dir / "figures" / name, name, carried.get(name, [])) for name in names
             if _anchor(name) not in shown]
    if extra:
        body += '\n<h2 id="more-figures">More figures and drawings</h2>\n' + "\n".join(extra)
    filters = ('<div id="filters"><label>filter claims <input id="claim-filter" type="search" '
               'placeholder="text in any column"></label> <label>show <select id="claim-matched">'
               '<option value="all">all</option><option value="yes">matched (fits too)</option>'
               '<option value="fit">fits only</option><option value="no">missed</option></select></label> '
               '<span id="claim-count"></span></div>')
    body = body.replace('<table id="claims"', filters + _legend() + '<table id="claims"', 1)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<title>depgraph reproduction of two studies</title>"
            f"<style>{_STYLE}</style></head><body>\n{body}\n<script>{_SCRIPT}</script></body></html>\n")
