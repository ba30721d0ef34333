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
import re
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from runner.escape import Markup, csv_cells, html, html_join, latex, markdown
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
# A figure's or table's name becomes file names and HTML ids: hofcat's own words, or ``runner.escape.file_name``.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


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
    """A booktabs LaTeX table of ``frame`` (every name and cell through ``runner.escape.latex``)."""
    head = " & ".join(latex(c) for c in frame.columns) + r" \\"
    rows = [" & ".join(latex(fmt_value(v)) for v in row) + r" \\" for row in frame.iter_rows()]
    return "\n".join(
        [
            "% written by hofcat; needs \\usepackage{booktabs}; text escaped, non-ASCII as accents or U+XXXX",
            r"\begin{table}[ht]",
            r"\centering",
            rf"\caption{{{latex(caption)}}}",
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
    """A GitHub-flavoured Markdown table of ``frame`` under its caption (text through ``runner.escape.markdown``)."""
    lines = [markdown(caption), "", "| " + " | ".join(map(markdown, frame.columns)) + " |"]
    lines.append("|" + "---|" * len(frame.columns))
    lines += ["| " + " | ".join(markdown(fmt_value(v)) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines) + "\n"


class Page:
    """One report page being written through a run directory's writer (files land atomically).

    Markup is built with ``runner.escape.html``: every value is escaped unless it is markup built the same way."""

    def __init__(self, out: RunWriter) -> None:
        self.out = out
        self.parts: list[Markup] = []  # report/figures and report/tables are made by the writer, links refused

    def section(self, title: str, *blocks: Markup | str, intro: Markup | str = "") -> None:
        """Add a section with its blocks (plain strings escaped), or nothing at all when every block is empty."""
        body = html_join(b for b in blocks if b)
        if body:
            self.parts.append(html("<section><h2>{}</h2>{}{}</section>", title, intro, body))

    def raw(self, markup: Markup) -> None:
        """Add markup built with ``runner.escape.html`` (the summary); a plain string is escaped."""
        self.parts.append(html_join([markup]))

    def _save(self, stage_file: str, data: bytes) -> None:
        with self.out.output_file("report", stage_file) as tmp:
            tmp.write_bytes(data)

    def figure(self, name: str, fig: object | None, caption: str, *, shows: Iterable[str] = ()) -> Markup:
        """Save a matplotlib figure as PNG, SVG and PDF; the embedded PNG with its caption ('' for no figure).

        ``shows`` names what the figure draws (e.g. every model), recorded on the element for readers and tests.
        """
        if fig is None:
            return Markup()
        _check_name(name)
        import matplotlib.pyplot as plt

        images = {}
        for kind in ("png", "svg", "pdf"):
            buf = io.BytesIO()
            fig.savefig(buf, format=kind, dpi=110, bbox_inches="tight", metadata=_metadata(kind))
            images[kind] = buf.getvalue()
            self._save(f"figures/{name}.{kind}", images[kind])
        plt.close(fig)
        data = base64.b64encode(images["png"]).decode("ascii")
        return html(
            '<figure id="fig-{name}" data-shows="{shown}"><img alt="{caption}" src="data:image/png;base64,{data}">'
            '<figcaption>{caption} <a href="figures/{name}.svg">SVG</a> · <a href="figures/{name}.pdf">PDF</a>'
            "</figcaption></figure>",
            name=name,
            shown="|".join(shows),
            caption=caption,
            data=data,
        )

    def table(self, name: str, frame: pl.DataFrame, caption: str, *, collapse: bool | None = None) -> Markup:
        """A sortable table with a CSV download, also written as Markdown and LaTeX ('' for an empty frame).

        The CSV's text cells are neutralised for spreadsheets (``runner.escape.csv_cells``). A table longer than
        ``EMBED_ROWS`` is a CSV file beside the page with its first rows shown (no paper prints it whole, so it
        has no Markdown or LaTeX copy)."""
        if frame.height == 0 or not frame.columns:
            return Markup()
        _check_name(name)
        flat = _flat(frame)
        safe = pl.from_arrow(csv_cells(flat.to_arrow()))
        assert isinstance(safe, pl.DataFrame)
        csv = safe.write_csv()
        self._save(f"tables/{name}.csv", csv.encode())
        long = frame.height > EMBED_ROWS
        if not long:
            self._save(f"tables/{name}.md", _markdown(flat, caption).encode())
            self._save(f"tables/{name}.tex", _latex(flat, caption).encode())
        text = [c for c, t in frame.schema.items() if t == pl.String or isinstance(t, pl.List | pl.Categorical)]
        side = ["l" if c in text else "" for c in frame.columns]
        head = html_join(html('<th class="{}">{}</th>', s, c) for s, c in zip(side, frame.columns, strict=True))
        shown = frame.head(PREVIEW_ROWS) if long else frame
        rows = html_join(
            html(
                "<tr>{}</tr>",
                html_join(html('<td class="{}">{}</td>', s, fmt_value(v)) for s, v in zip(side, row, strict=True)),
            )
            for row in shown.iter_rows()
        )
        if shown.height < frame.height:  # a long table is a file beside the page, not megabytes inside it
            href = f"tables/{name}.csv"
            count = f"{frame.height:,} rows; the first {shown.height} shown, all in tables/{name}.csv"
        else:
            href = "data:text/csv;charset=utf-8;base64," + base64.b64encode(csv.encode()).decode("ascii")
            count = f"{frame.height} rows"
        label = html(
            '<span class="caption">{} ({})</span><a class="csv" download="{}.csv" href="{}">CSV</a>',
            caption,
            count,
            name,
            href,
        )
        table = html(
            '<div class="scroll"><table class="sortable" id="table-{}"><thead><tr>{}</tr></thead>'
            "<tbody>{}</tbody></table></div>",
            name,
            head,
            rows,
        )
        fold = frame.height > COLLAPSE_ROWS if collapse is None else collapse
        if fold:
            return html("<details><summary>{}</summary>{}</details>", label, table)
        return html("<div>{}{}</div>", label, table)

    def write(self, title: str) -> Path:
        """Write ``report/index.html``; its path."""
        page = html(
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<title>{}</title><style>{}</style></head><body>{}<script>{}</script></body></html>",
            title,
            Markup(STYLE),
            html_join(self.parts),
            Markup(SCRIPT),
        )
        self._save("index.html", page.encode("utf-8"))
        return self.out.layout.output("report") / "index.html"


def _check_name(name: str) -> None:
    """Refuse a figure or table name that is not a safe file name (a programming error, not bad input)."""
    if not _NAME.match(name):
        raise ValueError(f"report item name {name!r}: not a safe file name; derive it with runner.escape.file_name")


def _metadata(kind: str) -> dict[str, str | None]:
    """Reproducible files: no creation date in SVG/PDF (matplotlib writes one by default)."""
    if kind == "svg":
        return {"Date": None}
    if kind == "pdf":
        return {"CreationDate": None}
    return {}
