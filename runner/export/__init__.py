"""The tidy export of a run: one long table of answers with their cell's factors, for other tools."""
