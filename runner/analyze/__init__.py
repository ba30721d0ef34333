"""Analyses of parsed answers: pure functions over a polars LazyFrame, written out by ``analyze_run``."""
