"""Scoring: per-question means → the six VSM13 indices, rank agreement with a reference, CAT scores."""
