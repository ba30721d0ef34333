"""The report page's building blocks: sections that vanish when empty, figures saved for papers, tables to download.

Every figure is written three ways into ``report/figures/`` (PNG for the page, SVG and PDF for papers) and the PNG
is embedded as a data URI. Every table is embedded as a sortable HTML table (a few lines of inline script), can
be downloaded from the page as CSV (a data URI, still offline), and is written as Markdown and LaTeX into
``report/tables/``; long tables are collapsed. Nothing on the page is fetched from outside the file.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from runner.report.text import html_text
from runner.rundir import RunWriter, read_output_table

__all__ = ["Page", "fmt_value"]

STYLE = """
*, *::before, *::after { box-sizing: border-box; }
body { font-family: sans-serif; margin: 0 auto; padding: 1em; max-width: 1200px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; overflow-wrap: anywhere; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.3em 0 0.6em; font-size: 13px; }
th, td { border: 1px solid #bbb; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #eee; cursor: pointer; } td.l, th.l { text-align: left; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; display: block; }
figcaption, .caption { font-size: 13px; color: #555; }
details { margin: 0.5em 0 1.2em; } summary { cursor: pointer; color: #035; }
a.csv { font-size: 12px; margin-left: 0.5em; }
ul.facts { padding-left: 1.2em; } .warn { color: #8a4b00; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 12px; }
"""

# Click a header to sort by it (numbers as numbers); no library, no network.
SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th, i) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0], rows = Array.from(body.rows);
    var up = th.dataset.dir !== 'up'; th.dataset.dir = up ? 'up' : 'down';
    rows.sort(function (a, b) {
      var x = a.cells[i].textContent, y = b.cells[i].textContent, p = parseFloat(x), q = parseFloat(y);
      var c = (!isNaN(p) && !isNaN(q)) ? p - q : x.localeCompare(y);
      return up ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""

COLLAPSE_ROWS = 12  # longer tables are folded into <details>
EMBED_ROWS = 2000  # longer tables are linked files with a preview on the page (a page stays a few megabytes)
PREVIEW_ROWS = 50


def analysis_table(run_dir: Path, name: str) -> pl.DataFrame:
    """One table of ``run_dir``'s analysis (empty when the analysis did not produce it)."""
    data = read_output_table(run_dir, "analysis", name)
    return pl.DataFrame() if data is None else pl.from_arrow(data)


def fmt_value(value: object) -> str:
    """A table cell: floats to 3 significant decimals, NaN/None as N/A, lists joined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "N/A"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-3 and value != 0 else f"{value:.3f}".rstrip("0").rstrip(".")
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """Lists and structs as text, so that CSV, Markdown and LaTeX can hold every column."""
    nested = [c for c, t in frame.schema.items() if isinstance(t, pl.List | pl.Array | pl.Struct)]
    return frame.with_columns(pl.col(c).map_elements(fmt_value, return_dtype=pl.String) for c in nested)


def _latex(frame: pl.DataFrame, caption: str) -> str:
    """A booktabs LaTeX table of ``frame``."""

    def esc(text: str) -> str:
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#")):
            text = text.replace(a, b)
        return text

    head = " & ".join(esc(c) for c in frame.columns) + r" \\"
    rows = [" & ".join(esc(fmt_value(v)) for v in row) + r" \\" for row in frame.iter_rows()]
    return "\n".join(
        [
            r"\begin{table}[ht]",
            r"\centering",
            rf"\caption{{{esc(caption)}}}",
            r"\begin{tabular}{" + "l" * len(frame.columns) + "}",
            r"\toprule",
            head,
            r"\midrule",
            *rows,
            r"\bottomrule",
            r"\end{tabular}",
            r"\end{table}",
            "",
        ]
    )


def _markdown(frame: pl.DataFrame, caption: str) -> str:
    """A GitHub-flavoured Markdown table of ``frame`` under its caption."""
    lines = [f"{caption}", "", "| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(fmt_value(v).replace("|", "\\|") for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines) + "\n"


class Page:
    """One report page being written through a run directory's writer (files land atomically)."""

    def __init__(self, out: RunWriter) -> None:
        self.out = out
        self.parts: list[str] = []
        for sub in ("figures", "tables"):
            (out.layout.output("report") / sub).mkdir(parents=True, exist_ok=True)

    def section(self, title: str, *blocks: str, intro: str = "") -> None:
        """Add a section with its blocks, or nothing at all when every block is empty."""
        body = "".join(b for b in blocks if b)
        if body:
            self.parts.append(f"<section><h2>{html_text(title)}</h2>{intro}{body}</section>")

    def raw(self, markup: str) -> None:
        """Add markup as it is (the summary)."""
        self.parts.append(markup)

    def _save(self, stage_file: str, data: bytes) -> None:
        with self.out.output_file("report", stage_file) as tmp:
            tmp.write_bytes(data)

    def figure(self, name: str, fig: object | None, caption: str, *, shows: Iterable[str] = ()) -> str:
        """Save a matplotlib figure as PNG, SVG and PDF; the embedded PNG with its caption ('' for no figure).

        ``shows`` names what the figure draws (e.g. every model), recorded on the element for readers and tests.
        """
        if fig is None:
            return ""
        import matplotlib.pyplot as plt

        images = {}
        for kind in ("png", "svg", "pdf"):
            buf = io.BytesIO()
            fig.savefig(buf, format=kind, dpi=110, bbox_inches="tight", metadata=_metadata(kind))
            images[kind] = buf.getvalue()
            self._save(f"figures/{name}.{kind}", images[kind])
        plt.close(fig)
        data = base64.b64encode(images["png"]).decode("ascii")
        shown = html_text("|".join(shows))
        return (
            f'<figure id="fig-{name}" data-shows="{shown}"><img alt="{html_text(caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html_text(caption)} '
            f'<a href="figures/{name}.svg">SVG</a> · <a href="figures/{name}.pdf">PDF</a></figcaption></figure>'
        )

    def table(self, name: str, frame: pl.DataFrame, caption: str, *, collapse: bool | None = None) -> str:
        """A sortable table with a CSV download, also written as Markdown and LaTeX ('' for an empty frame)."""
        if frame.height == 0 or not frame.columns:
            return ""
        flat = _flat(frame)
        csv = flat.write_csv()
        self._save(f"tables/{name}.csv", csv.encode())
        self._save(f"tables/{name}.md", _markdown(flat, caption).encode())
        self._save(f"tables/{name}.tex", _latex(flat, caption).encode())
        text = [c for c, t in frame.schema.items() if t == pl.String or isinstance(t, pl.List | pl.Categorical)]
        shown = frame.head(PREVIEW_ROWS) if frame.height > EMBED_ROWS else frame
        head = "".join(f'<th class="{"l" if c in text else ""}">{html_text(c)}</th>' for c in frame.columns)
        rows = "".join(
            "<tr>"
            + "".join(
                f'<td class="{"l" if c in text else ""}">{html_text(fmt_value(v))}</td>'
                for c, v in zip(frame.columns, row, strict=True)
            )
            + "</tr>"
            for row in shown.iter_rows()
        )
        if shown.height < frame.height:  # a long table is a file beside the page, not megabytes inside it
            href = f"tables/{name}.csv"
            count = f"{frame.height:,} rows; the first {shown.height} shown, all in tables/{name}.csv, .md and .tex"
        else:
            href = "data:text/csv;charset=utf-8;base64," + base64.b64encode(csv.encode()).decode("ascii")
            count = f"{frame.height} rows"
        label = (
            f'<span class="caption">{html_text(caption)} ({count})</span>'
            f'<a class="csv" download="{html_text(name)}.csv" href="{href}">CSV</a>'
        )
        table = (
            f'<div class="scroll"><table class="sortable" id="table-{html_text(name)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></div>"
        )
        fold = frame.height > COLLAPSE_ROWS if collapse is None else collapse
        if fold:
            return f"<details><summary>{label}</summary>{table}</details>"
        return f"<div>{label}{table}</div>"

    def write(self, title: str) -> Path:
        """Write ``report/index.html``; its path."""
        page = (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html_text(title)}</title><style>{STYLE}</style></head><body>"
            f"{''.join(self.parts)}<script>{SCRIPT}</script></body></html>"
        )
        self._save("index.html", page.encode("utf-8"))
        return self.out.layout.output("report") / "index.html"


def _metadata(kind: str) -> dict[str, str | None]:
    """Reproducible files: no creation date in SVG/PDF (matplotlib writes one by default)."""
    if kind == "svg":
        return {"Date": None}
    if kind == "pdf":
        return {"CreationDate": None}
    return {}
