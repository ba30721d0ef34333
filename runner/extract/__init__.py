"""The extractor fallback: an extractor model restates answers the parser found ambiguous, in a constrained format.

A stage after ``sweep`` (it sends through the sweep's providers, transport, limits and retries) and before
``score``/``analyze`` (which use its rows only when asked: ``AnalysisOptions.extracted``). Modules: ``request``
(the extractor's messages, constraint fields and the reading of its reply; pure), ``stage`` (sending and
storing ``RUN_DIR/extractions/``), ``overlay`` (extracted answers laid over the parsed ones for the analysis).
"""
