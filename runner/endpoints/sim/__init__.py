"""A simulated OpenAI-compatible endpoint whose respondents answer the VSM13 from known reference scores.

Analyses of its replies have a known truth (docs/simulator.md): the expected index ranking equals the
reference ranking. It also injects the faults real APIs show (rate limits, 5xx, malformed bodies, hangs,
refusals, chatty replies), all reproducible from a seed, and logs every request server-side.
"""

from __future__ import annotations

from runner.endpoints.sim.config import DEFAULT_LANGUAGE_COUNTRIES, Latency, SimConfig
from runner.endpoints.sim.log import LogEntry, RequestLog, max_in_window
from runner.endpoints.sim.respondent import AnswerModel, CountryScores
from runner.endpoints.sim.seeding import request_key
from runner.endpoints.sim.server import SimProcess, SimServer, SimServerThread, build_sim_app
from runner.errors import SimConfigError, SimDataError, SimError

__all__ = [
    "DEFAULT_LANGUAGE_COUNTRIES",
    "AnswerModel",
    "CountryScores",
    "Latency",
    "LogEntry",
    "RequestLog",
    "SimConfig",
    "SimConfigError",
    "SimDataError",
    "SimError",
    "SimProcess",
    "SimServer",
    "SimServerThread",
    "build_sim_app",
    "max_in_window",
    "request_key",
]
