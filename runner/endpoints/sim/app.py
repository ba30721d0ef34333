"""The aiohttp application: OpenAI-compatible chat completions answered by simulated respondents, with faults.

Order of decisions per request: validate (400) → request and token budgets (429, not counted as an attempt)
→ fault draw (5xx, malformed 200, hang) → latency → read the prompt → sample answers → reply text (refusal,
chatty, plain) → max_tokens truncation → log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from runner import __version__
from runner.endpoints.sim import replies
from runner.endpoints.sim.batch import BatchService
from runner.endpoints.sim.chat_request import BadRequest, ChatRequest, parse_request
from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.effects import Planted, planted
from runner.endpoints.sim.faults import Fault, draw_fault, latency_s
from runner.endpoints.sim.limits import Refusal, RequestBudget
from runner.endpoints.sim.log import LogEntry, RequestLog, max_in_window
from runner.endpoints.sim.logprobs import logprobs_json
from runner.endpoints.sim.respondent import AnswerModel
from runner.endpoints.sim.seeding import Draws, key_of
from runner.endpoints.sim.verbalized import verbalized_reply
from runner.survey.cell import PromptCell

JSON = "application/json; charset=utf-8"
HTML = "text/html; charset=utf-8"
# The completion body as a template: formatting it is several times cheaper than json.dumps of a dict, and
# the server's throughput is what the runner's benchmarks stand on (tests decode it with json.loads).
_COMPLETION = (
    '{{"id": "{id}", "object": "chat.completion", "created": {created}, "model": {model}, '
    f'"system_fingerprint": "hofcat-sim-{__version__}", '
    '"choices": [{{"index": 0, "message": {{"role": "assistant", "content": {content}}}, "logprobs": {logprobs}, '
    '"finish_reason": "{finish}"}}], '
    '"usage": {{"prompt_tokens": {prompt_tokens}, "completion_tokens": {completion_tokens}, '
    '"total_tokens": {total_tokens}}}}}'
)
_json_string = json.encoder.encode_basestring  # type: ignore[attr-defined]  # str → JSON string literal


class PromptReader(Protocol):
    """Reads a prompt as a model would: which questions, which persona, which option order and format."""

    def read(self, messages: tuple[tuple[str, str], ...]) -> PromptCell | None:
        """The cell the messages ask, or None when they ask no VSM13 question."""

    def labels(self, language: str, question: int) -> tuple[str, ...] | None:
        """Option texts of ``question`` in option-ID order, in ``language``; None when unknown."""


@dataclass(slots=True)
class _Reply:
    status: int
    body: bytes
    content_type: str
    outcome: str
    text: str
    headers: dict[str, str]
    finish_reason: str | None = None


class SimApp:
    """State of one simulated endpoint: config, generative model, budget, attempt counts and the log."""

    def __init__(self, config: SimConfig, model: AnswerModel, reader: PromptReader) -> None:
        self.config = config
        self.model = model
        self.reader = reader
        self.log = RequestLog(config.log_limit, config.log_path)
        self.budget = RequestBudget(config.requests_per_minute, config.burst, config.tokens_per_minute)
        self.closing = asyncio.Event()
        self._attempts: dict[str, int] = {}
        self._seq = 0
        self._t0 = time.monotonic()
        self._t0_unix = time.time()

    def application(self) -> web.Application:
        """The aiohttp application serving /v1/chat/completions, /v1/models, /health and /sim/*."""
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/sim/log", self.log_endpoint)
        app.router.add_get("/sim/stats", self.stats_endpoint)
        app.router.add_get("/sim/truth", self.truth_endpoint)
        BatchService(self).routes(app)
        return app

    def next_seq(self) -> int:
        """A fresh request sequence number (batch requests are numbered like online ones)."""
        seq = self._seq
        self._seq += 1
        return seq

    # ---- chat completions -------------------------------------------------------------------------------

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """Answer one chat-completions request (see the module docstring for the order of decisions)."""
        arrival = time.monotonic()
        seq = self._seq
        self._seq += 1
        raw = await request.read()
        try:
            chat = parse_request(raw)
        except BadRequest as exc:
            error = {"error": {"message": str(exc), "type": "invalid_request_error", "param": exc.param, "code": None}}
            reply = _Reply(400, json.dumps(error).encode(), JSON, "bad_request", str(exc), {})
            return self._finish(seq, arrival, reply, None, "", 0, None, ())
        key = key_of(chat.raw_messages, chat.body)
        refusal = self.budget.try_acquire(arrival - self._t0, _prompt_tokens(chat.messages) + (chat.max_tokens or 0))
        if refusal is not None:
            return self._finish(seq, arrival, self._rate_limited(arrival, refusal, chat), chat, key, 0, None, ())
        attempt = 0
        if self.config.any_attempt_fault:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        fault = draw_fault(self.config, key, attempt)
        delay = latency_s(self.config, key, attempt)
        cell = None
        answers: tuple[int | None, ...] = ()
        entry_written = False
        try:
            if fault.kind == "hang":
                await self._sleep(self.config.hang_s)
            elif delay > 0.0:
                await self._sleep(delay)
            if fault.kind == "server_error":
                reply = _server_error(fault)
            else:
                cell, answers, reply = self._answer(chat, key, seq, fault)
            entry_written = True
            return self._finish(seq, arrival, reply, chat, key, attempt, cell, answers)
        finally:
            if not entry_written:  # the client went away (handler cancelled) before the answer
                gone = _Reply(0, b"", JSON, fault.kind if fault.kind != "none" else "cancelled", "", {})
                self._finish(seq, arrival, gone, chat, key, attempt, cell, answers)

    def _answer(
        self, chat: ChatRequest, key: str, seq: int, fault: Fault
    ) -> tuple[PromptCell | None, tuple[int | None, ...], _Reply]:
        cell = self.reader.read(chat.messages)
        if cell is None:
            return None, (), self._completion(chat, key, seq, replies.UNKNOWN_PROMPT, "unknown_prompt", fault, None)
        # planted effects follow the design as the prompt states it (before JSON mode or a grammar change the reply)
        effects = self._planted(cell, chat)
        if cell.reply_format == "verbalized":  # each option's probability, as a JSON object
            return cell, *self._verbalized(chat, key, seq, fault, cell, effects)
        if chat.json_mode and cell.reply_format != "json":  # a model in JSON mode answers in JSON
            cell = dataclasses.replace(cell, reply_format="json")
        if chat.grammar:  # a grammar-constrained model can emit only what the grammar admits: the bare number
            cell = dataclasses.replace(cell, reply_format="number")
            fault = dataclasses.replace(fault, refusal=False, chatty=False, ambiguous=False)
        country = self.country_of(cell)
        # Seeded requests are reproducible; unseeded ones get fresh draws per arrival, as from a real API.
        rng = (
            Draws(self.config.seed, "answer", key)
            if chat.seed is not None
            else Draws(self.config.seed, "answer-unseeded", seq)
        )
        answers = tuple(
            self.model.sample(country, q, chat.temperature, chat.top_p, rng, effects) for q in cell.questions
        )
        if fault.refusal:
            text, outcome = replies.refusal_reply(cell.language), "refusal"
            logged: tuple[int | None, ...] = (None,) * len(answers)
        elif fault.chatty and cell.labels == "digits":
            labels = self.reader.labels(cell.language, cell.questions[0]) if cell.mode == "item" else None
            text, outcome, logged = replies.chatty_reply(cell, answers, labels, fault.rng), "chatty", answers
        elif fault.ambiguous and cell.labels == "digits" and cell.reply_format != "json":
            text, outcome, logged = replies.ambiguous_reply(cell, answers), "ambiguous", answers
        else:
            words = self.reader.labels(cell.language, cell.questions[0]) if cell.labels == "words" else None
            text, outcome, logged = replies.plain_reply(cell, answers, words), "ok", answers
        return cell, logged, self._completion(chat, key, seq, text, outcome, fault, cell, effects)

    def _planted(self, cell: PromptCell, chat: ChatRequest) -> Planted | None:
        """The design-factor effects planted for this request (runner/endpoints/sim/effects.py)."""
        config = self.config
        return planted(
            config.seed, config.position_bias, config.effects, cell, chat.model, chat.top_logprobs is not None
        )

    def _verbalized(
        self, chat: ChatRequest, key: str, seq: int, fault: Fault, cell: PromptCell, effects: Planted | None
    ) -> tuple[tuple[int | None, ...], _Reply]:
        """A verbalized reply: the respondent's stated distribution (runner/endpoints/sim/verbalized.py)."""
        if fault.refusal and not chat.grammar:  # a grammar admits only the object
            text = replies.refusal_reply(cell.language)
            return (None,), self._completion(chat, key, seq, text, "refusal", fault, cell)
        c = self.config
        rng = Draws(c.seed, "verbalized", key) if chat.seed is not None else Draws(c.seed, "verbalized-unseeded", seq)
        malformed = 0.0 if chat.grammar or chat.json_mode else c.verbalized_malformed_rate  # constrained: well-formed
        text, outcome, likeliest = verbalized_reply(
            self.model,
            cell,
            self.country_of(cell),
            temperature=c.verbalized_temperature,
            noise=c.verbalized_noise,
            malformed_rate=malformed,
            rng=rng,
            planted=effects,
        )
        return (likeliest,), self._completion(chat, key, seq, text, outcome, fault, cell, effects)

    def country_of(self, cell: PromptCell) -> str | None:
        """The respondent's country: the persona's, else the prompt language's default (None: neutral)."""
        if cell.framing.kind != "none" and cell.framing.country:
            return cell.framing.country
        return self.config.language_countries.get(cell.language)

    def _completion(
        self,
        chat: ChatRequest,
        key: str,
        seq: int,
        text: str,
        outcome: str,
        fault: Fault,
        cell: PromptCell | None,
        effects: Planted | None = None,
    ) -> _Reply:
        finish = "stop"
        if chat.max_tokens is not None and replies.estimate_tokens(text) > chat.max_tokens:
            text, finish = replies.truncate_to_tokens(text, chat.max_tokens), "length"
        logprobs = "null"
        if chat.top_logprobs is not None:  # the first token's alternatives, from the known truth
            country = None if cell is None else self.country_of(cell)
            refused = outcome in ("refusal", "unknown_prompt", "chatty")  # prose first: no option token
            logprobs = logprobs_json(self.model, None if refused else cell, country, text, chat.top_logprobs, effects)
        prompt_tokens = _prompt_tokens(chat.messages)
        completion_tokens = replies.estimate_tokens(text)
        body = _COMPLETION.format(
            id=f"chatcmpl-sim-{key[:16]}-{seq}",
            created=int(self._t0_unix + (time.monotonic() - self._t0)),
            model=_json_string(chat.model),
            content=_json_string(text),
            logprobs=logprobs,
            finish=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        ).encode()
        if fault.kind == "malformed":
            return _malformed(fault, body, text)
        return _Reply(200, body, JSON, outcome, text, {}, finish)

    def _rate_limited(self, arrival: float, refusal: Refusal, chat: ChatRequest) -> _Reply:
        if math.isinf(refusal.wait_s):  # more tokens than the whole per-minute budget: retrying cannot help
            message = (
                f"Request too large: it may use {_prompt_tokens(chat.messages) + (chat.max_tokens or 0)} "
                f"tokens, more than the limit of {self.config.tokens_per_minute} tokens per minute."
            )
            error = {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": "max_tokens",
                    "code": "request_too_large",
                }
            }
            return _Reply(400, json.dumps(error).encode(), JSON, "bad_request", message, {})
        limit = self.config.requests_per_minute if refusal.budget == "requests" else self.config.tokens_per_minute
        message = f"Rate limit reached for {refusal.budget}: limit {limit} per minute."
        error = {"error": {"message": message, "type": refusal.budget, "param": None, "code": "rate_limit_exceeded"}}
        headers = self.budget.headers(arrival - self._t0)
        headers["Retry-After"] = str(max(1, math.ceil(refusal.wait_s)))
        headers["retry-after-ms"] = str(max(1, math.ceil(refusal.wait_s * 1000)))
        headers[f"x-ratelimit-reset-{refusal.budget}"] = f"{refusal.wait_s:.3f}s"
        return _Reply(429, json.dumps(error).encode(), JSON, "rate_limited", message, headers)

    async def _sleep(self, seconds: float) -> None:
        """Wait ``seconds`` or until the server starts closing, whichever comes first."""
        if self.closing.is_set():
            return
        try:
            await asyncio.wait_for(self.closing.wait(), seconds)
        except TimeoutError:
            pass

    def _finish(
        self,
        seq: int,
        arrival: float,
        reply: _Reply,
        chat: ChatRequest | None,
        key: str,
        attempt: int,
        cell: PromptCell | None,
        answers: tuple[int | None, ...],
    ) -> web.Response:
        now = time.monotonic()
        framing = cell.framing if cell is not None else None
        self.log.append(
            LogEntry(
                seq=seq,
                arrival_s=arrival - self._t0,
                arrival_unix=self._t0_unix + (arrival - self._t0),
                status=reply.status,
                outcome=reply.outcome,
                request_key=key,
                attempt=attempt,
                seed=chat.seed if chat else None,
                temperature=chat.temperature if chat else None,
                top_p=chat.top_p if chat else None,
                language=cell.language if cell else None,
                mode=cell.mode if cell else None,
                questions=cell.questions if cell else (),
                country=self.country_of(cell) if cell else None,
                persona=framing is not None and framing.kind != "none",
                option_order=cell.option_order if cell else (),
                reply_format=cell.reply_format if cell else None,
                answers=answers,
                reply=reply.text,
                finish_reason=reply.finish_reason,
                service_ms=(now - arrival) * 1000.0,
            )
        )
        headers = dict(reply.headers)
        if reply.status != 429 and (self.budget.minute is not None or self.budget.tokens is not None):
            headers.update(self.budget.headers(now - self._t0))
        headers["Content-Type"] = reply.content_type
        return web.Response(status=reply.status or 499, body=reply.body, headers=headers)

    # ---- other endpoints ----------------------------------------------------------------------------------

    async def models(self, request: web.Request) -> web.Response:
        """GET /v1/models: the one simulated model."""
        data = [{"id": self.config.model, "object": "model", "created": 0, "owned_by": "hofcat-sim"}]
        return web.json_response({"object": "list", "data": data})

    async def health(self, request: web.Request) -> web.Response:
        """GET /health."""
        return web.json_response({"status": "ok"})

    async def log_endpoint(self, request: web.Request) -> web.Response:
        """GET /sim/log?since=SEQ&limit=N: in-memory log entries with seq >= since (oldest first)."""
        since, limit = _query_numbers(request, int, "integers", since="0", limit="100000")
        entries = [e.as_json() for e in self.log if e.seq >= since][:limit]
        return web.json_response({"total": self.log.total, "entries": entries})

    def stats(self) -> dict[str, Any]:
        """Counts by outcome and status, uptime, mean rate and the busiest 60-s and 1-s windows of arrivals."""
        uptime = time.monotonic() - self._t0
        arrivals = [e.arrival_s for e in self.log]
        return {
            "total": self.log.total,
            "by_outcome": dict(self.log.by_outcome),
            "by_status": {str(k): v for k, v in self.log.by_status.items()},
            "uptime_s": uptime,
            "requests_per_s": self.log.total / uptime if uptime > 0 else 0.0,
            "max_requests_in_60s": max_in_window(arrivals, 60.0),
            "max_requests_in_1s": max_in_window(arrivals, 1.0),
            "config": self.config.as_dict(),
        }

    async def stats_endpoint(self, request: web.Request) -> web.Response:
        """GET /sim/stats."""
        return web.json_response(self.stats(), dumps=lambda o: json.dumps(o, default=str))

    async def truth_endpoint(self, request: web.Request) -> web.Response:
        """GET /sim/truth?country=A&country=B&temperature=T&top_p=P: reference scores and expected indices."""
        temperature, top_p = _query_numbers(request, float, "numbers", temperature="1", top_p="1")
        countries = request.query.getall("country", []) or sorted(self.model.scores)
        truth = {c: self.model.truth(c, temperature, top_p) for c in countries}
        return web.json_response(
            {"signal": self.model.signal, "temperature": temperature, "top_p": top_p, "countries": truth}
        )


def _query_numbers(request: web.Request, convert: Callable[[str], Any], kind: str, **defaults: str) -> list[Any]:
    """The named query parameters (or their defaults) through ``convert``; HTTP 400 naming them all if one fails."""
    try:
        return [convert(request.query.get(name, default)) for name, default in defaults.items()]
    except ValueError:
        raise web.HTTPBadRequest(text=f"{' and '.join(defaults)} must be {kind}") from None


@functools.lru_cache(maxsize=16_384)
def _prompt_tokens(messages: tuple[tuple[str, str], ...]) -> int:
    """Estimated prompt tokens: each message's content plus 4 tokens of chat framing."""
    return sum(replies.estimate_tokens(content) + 4 for _, content in messages)


def _server_error(fault: Fault) -> _Reply:
    status = (500, 502, 503)[fault.variant % 3]
    message = "The server had an error while processing your request. Sorry about that!"
    error = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    return _Reply(status, json.dumps(error).encode(), JSON, "server_error", message, {})


def _malformed(fault: Fault, body: bytes, text: str) -> _Reply:
    """HTTP 200 whose body a client cannot use: the JSON cut short, or a proxy's HTML error page."""
    if fault.variant % 2 == 0:
        cut = body[: max(1, int(len(body) * fault.fraction))]
        return _Reply(200, cut, JSON, "malformed", cut.decode("utf-8", "replace"), {})
    html = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
    return _Reply(200, html.encode(), HTML, "malformed", html, {})
