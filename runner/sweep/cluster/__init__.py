"""Sweeps on a Ray cluster (``hofcat run SPEC --out DIR --ray auto|ADDRESS``): shards of the plan, one run directory.

The driver (the ``hofcat run`` process) opens the run directory as a session does (the lock, the manifest, the
session entry, the determinism probe), walks the cells still without an outcome and deals them into ``n``
shards by cell key (``shard_of``: the key's first 16 hex digits modulo ``n``; ``n`` = ``--ray-workers``, else
the cluster's CPUs, at most the largest ``max_concurrency``). Each shard is one Ray task (one CPU, retried by
Ray up to ``SHARD_RETRIES`` times when its worker process or node dies) that opens the run directory as a
secondary writer (``ShardWriter``: no lock, no manifest; its parts are ``part-N-TOKEN`` with a token of its
own), recomputes which of its shard's cells are still without an outcome — so a retried shard resumes from
what it committed — and runs them through the same ``CellSweep`` (executor, commits, parse stage) as a
one-process session. A cell's row is committed once, by the one shard its key belongs to: nothing is stored
twice, and a second ``hofcat run`` on the directory, with or without ``--ray``, resumes the rest like any
session.

Limits: every rate-limited endpoint gets one limiter actor (``LimiterHost``) holding the endpoint's
``RateLimiter`` and its admissions journal (``runner.rundir.admissions``); the workers' executors take each
admission from it (``RemoteLimiter``), so all workers together keep the endpoint's requests and tokens per
window, also across restarts. An admission of a worker that died is given back when its lease ends
(``LEASE_SLACK_S`` past twice the request timeout), counted as finished then. ``max_concurrency`` is split
between the workers (they sum to it). Progress: workers report their counters to one actor
(``ProgressBoard``) every ``REPORT_S``; the driver reads it and shows the one progress line for the whole
cluster, per endpoint and per worker (its pid, and its attempt when Ray retried it).

Ray is optional (``pip install 'hofcat[ray]'``): this package imports it only when a sweep runs on Ray.

Modules, in the order a sweep uses them: ``driver`` (the ``hofcat run`` process: connect, deal, wait,
record), ``shards`` (which cells are whose), ``worker`` (one shard's Ray task), ``writer`` (its secondary
writer of the run directory), ``limiter`` (the endpoint's limiter actor and the workers' handle on it),
``progress`` (the board actor and the cluster's progress line).
"""

from __future__ import annotations

from runner.sweep.cluster.driver import INSTALL, check_for_ray, ray_module, run_sweep_on_ray, run_sweep_on_ray_async
from runner.sweep.cluster.shards import shard_of

__all__ = ["INSTALL", "check_for_ray", "ray_module", "run_sweep_on_ray", "run_sweep_on_ray_async", "shard_of"]
