"""The HTML report of an analysed run: matplotlib figures (PNG) and the papers' tables, self-contained."""
