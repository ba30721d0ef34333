"""The simulator's batch APIs: OpenAI's Files + Batches, Anthropic's Message Batches and Gemini's batch mode.

Requests in a batch are answered by the same respondents as online ones (same truth, same seeding), but only
when the batch completes: ``batch_latency_s`` after it was created (slow completion), so a client has to poll.
Faults, drawn per batch and per request from the server seed: ``batch_error_rate`` of the requests fail alone
(a 500 in OpenAI's error file, ``errored`` in Anthropic's results), and ``batch_expire_rate`` of the batches
expire with only their first half processed (the rest ``batch_expired`` / ``expired``).

Every submission is counted per ``custom_id`` (``GET /sim/batches``), so tests can prove that no cell was ever
submitted twice. State lives in memory: it survives the client, not the server.

OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches/{id}``, ``GET /v1/batches`` (newest first, ``limit``/``after``). Anthropic:
``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``, ``GET /v1/messages/batches/{id}/results``,
``GET /v1/messages/batches`` (newest first). Gemini (base URL ``…/v1beta``): ``POST
/v1beta/models/{model}:batchGenerateContent`` (inlined requests), ``GET /v1beta/batches/{id}`` (an operation),
``GET /v1beta/batches``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from runner.endpoints.sim.chat_request import parse_request
from runner.endpoints.sim.faults import NO_FAULT
from runner.endpoints.sim.seeding import Draws, key_of
from runner.errors import BadRequest

if TYPE_CHECKING:
    from runner.endpoints.sim.app import SimApp

__all__ = ["BatchService"]

MAX_REQUESTS = 50_000  # OpenAI's per-batch request limit (Anthropic allows 100,000); the client splits below it


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return web.json_response(body, status=status)


@dataclass(slots=True)
class _Batch:
    id: str
    kind: str  # "openai" | "anthropic" | "gemini"
    created: float  # server clock (monotonic seconds)
    created_unix: int
    requests: list[tuple[str, dict[str, Any]]]  # (custom_id, chat-completions body)
    metadata: dict[str, Any] = field(default_factory=dict)
    expires: bool = False
    results: list[dict[str, Any]] | None = None  # per request, once complete


class BatchService:
    """Batch state and handlers of one simulated endpoint; answers through its ``SimApp``."""

    def __init__(self, app: SimApp) -> None:
        self.app = app
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.submitted: Counter[str] = Counter()  # custom_id → times submitted in any batch
        self._n = 0

    def routes(self, app: web.Application) -> None:
        """Register the batch endpoints on ``app``."""
        app.router.add_post("/v1/files", self.upload)
        app.router.add_get("/v1/files/{id}/content", self.file_content)
        app.router.add_post("/v1/batches", self.create_openai)
        app.router.add_get("/v1/batches", self.list_openai)
        app.router.add_get("/v1/batches/{id}", self.get_openai)
        app.router.add_post("/v1/messages/batches", self.create_anthropic)
        app.router.add_get("/v1/messages/batches", self.list_anthropic)
        app.router.add_get("/v1/messages/batches/{id}", self.get_anthropic)
        app.router.add_get("/v1/messages/batches/{id}/results", self.results_anthropic)
        app.router.add_post("/v1beta/models/{target}", self.create_gemini)
        app.router.add_get("/v1beta/batches", self.list_gemini)
        app.router.add_get("/v1beta/batches/{id}", self.get_gemini)
        app.router.add_get("/sim/batches", self.sim_batches)

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n:08d}"

    def _now(self) -> float:
        return time.monotonic()

    # ---- answering ---------------------------------------------------------------------------------------

    def _new_batch(self, kind: str, requests: list[tuple[str, dict[str, Any]]], metadata: dict) -> _Batch:
        prefix = {"openai": "batch_sim", "anthropic": "msgbatch_sim", "gemini": "gembatch_sim"}[kind]
        batch = _Batch(self._id(prefix), kind, self._now(), int(time.time()), requests, metadata)
        config = self.app.config
        batch.expires = Draws(config.seed, "batch-expire", batch.id).random() < config.batch_expire_rate
        self.batches[batch.id] = batch
        self.submitted.update(custom_id for custom_id, _ in requests)
        return batch

    def _complete(self, batch: _Batch) -> bool:
        """Whether ``batch`` has finished (answering it the first time it is seen finished)."""
        if self._now() - batch.created < self.app.config.batch_latency_s:
            return False
        if batch.results is None:
            batch.results = [self._result(batch, i, cid, body) for i, (cid, body) in enumerate(batch.requests)]
        return True

    def _result(self, batch: _Batch, i: int, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request's outcome: ``{"status": 200, "body": completion}`` or ``{"error": code, "message": …}``."""
        if batch.expires and i >= len(batch.requests) // 2:
            return {"error": "batch_expired", "message": "This request could not be executed before the batch expired."}
        if Draws(self.app.config.seed, "batch-error", batch.id, custom_id).random() < self.app.config.batch_error_rate:
            return {"error": "server_error", "message": "The server had an error processing this request."}
        try:
            chat = parse_request(json.dumps(body).encode())
        except BadRequest as exc:
            return {"error": "invalid_request", "message": str(exc)}
        key = key_of(chat.raw_messages, chat.body)
        seq = self.app.next_seq()
        _, _, reply = self.app._answer(chat, key, seq, NO_FAULT)
        return {"status": reply.status, "body": json.loads(reply.body)}

    def _counts(self, batch: _Batch, done: bool) -> dict[str, int]:
        if not done or batch.results is None:
            return {"total": len(batch.requests), "completed": 0, "failed": 0}
        failed = sum("error" in r for r in batch.results)
        return {"total": len(batch.requests), "completed": len(batch.requests) - failed, "failed": failed}

    # ---- OpenAI ------------------------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        """POST /v1/files: a multipart upload with ``purpose`` and ``file``."""
        if not request.content_type.startswith("multipart/"):
            return _error(400, "expected a multipart/form-data upload")
        purpose, data, name = None, None, "input.jsonl"
        async for part in await request.multipart():
            if part.name == "purpose":
                purpose = (await part.text()).strip()
            elif part.name == "file":
                name = part.filename or name
                data = await part.read()
        if purpose != "batch" or data is None:
            return _error(400, "a file with purpose=batch is required")
        file_id = self._id("file-sim")
        self.files[file_id] = bytes(data)
        obj = {"id": file_id, "object": "file", "bytes": len(data), "filename": name, "purpose": "batch"}
        return web.json_response({**obj, "created_at": int(time.time())})

    async def file_content(self, request: web.Request) -> web.Response:
        """GET /v1/files/{id}/content."""
        data = self.files.get(request.match_info["id"])
        if data is None:
            return _error(404, f"No such File object: {request.match_info['id']}")
        return web.Response(body=data, content_type="application/jsonl")

    async def create_openai(self, request: web.Request) -> web.Response:
        """POST /v1/batches: a batch over an uploaded JSONL file of chat-completions requests."""
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "body is not JSON")
        data = self.files.get(body.get("input_file_id", ""))
        if data is None:
            return _error(404, f"No such File object: {body.get('input_file_id')}")
        if body.get("endpoint") != "/v1/chat/completions":
            return _error(400, "endpoint must be /v1/chat/completions")
        requests = []
        for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                requests.append((str(item["custom_id"]), dict(item["body"])))
            except (ValueError, KeyError, TypeError):
                return _error(400, f"line {n} of the input file is not a batch request")
        if len(requests) > MAX_REQUESTS or len({c for c, _ in requests}) < len(requests):
            return _error(400, f"a batch holds at most {MAX_REQUESTS} requests with unique custom_id values")
        metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        batch = self._new_batch("openai", requests, metadata)
        return web.json_response(self._openai_object(batch))

    def _openai_object(self, batch: _Batch) -> dict[str, Any]:
        done = self._complete(batch)
        status = ("expired" if batch.expires else "completed") if done else "in_progress"
        obj: dict[str, Any] = {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "status": status,
            "created_at": batch.created_unix,
            "metadata": batch.metadata,
            "request_counts": self._counts(batch, done),
            "output_file_id": None,
            "error_file_id": None,
        }
        if done and batch.results is not None:
            out, err = [], []
            for (custom_id, _), result in zip(batch.requests, batch.results, strict=True):
                line_id = f"batch_req_{batch.id}_{custom_id}"
                if "error" in result:
                    err.append(
                        {
                            "id": line_id,
                            "custom_id": custom_id,
                            "response": None,
                            "error": {"code": result["error"], "message": result["message"]},
                        }
                    )
                else:
                    response = {"status_code": result["status"], "request_id": line_id, "body": result["body"]}
                    out.append({"id": line_id, "custom_id": custom_id, "response": response, "error": None})
            for name, lines in (("output_file_id", out), ("error_file_id", err)):
                if lines:
                    file_id = f"file-{batch.id}-{name[:3]}"
                    self.files.setdefault(file_id, "".join(json.dumps(x) + "\n" for x in lines).encode())
                    obj[name] = file_id
        return obj

    async def get_openai(self, request: web.Request) -> web.Response:
        """GET /v1/batches/{id}."""
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch.kind != "openai":
            return _error(404, f"No such Batch object: {request.match_info['id']}")
        return web.json_response(self._openai_object(batch))

    def _listing(self, request: web.Request, kind: str) -> tuple[list[_Batch], bool]:
        batches = [b for b in reversed(self.batches.values()) if b.kind == kind]
        after = request.query.get("after") or request.query.get("after_id")
        if after:
            ids = [b.id for b in batches]
            batches = batches[ids.index(after) + 1 :] if after in ids else []
        limit = max(1, min(100, int(request.query.get("limit", "20"))))
        return batches[:limit], len(batches) > limit

    async def list_openai(self, request: web.Request) -> web.Response:
        """GET /v1/batches?limit=&after=: newest first."""
        page, more = self._listing(request, "openai")
        return web.json_response({"object": "list", "data": [self._openai_object(b) for b in page], "has_more": more})

    # ---- Anthropic ---------------------------------------------------------------------------------------

    async def create_anthropic(self, request: web.Request) -> web.Response:
        """POST /v1/messages/batches: ``{"requests": [{"custom_id", "params": Messages request}]}``."""
        try:
            body = await request.json()
            items = [(str(r["custom_id"]), _chat_body(dict(r["params"]))) for r in body["requests"]]
        except (ValueError, KeyError, TypeError):
            return _error(400, "requests must be a list of {custom_id, params} with Messages parameters")
        if not items or len(items) > 100_000 or len({c for c, _ in items}) < len(items):
            return _error(400, "a batch holds 1 to 100,000 requests with unique custom_id values")
        batch = self._new_batch("anthropic", items, {})
        return web.json_response(self._anthropic_object(batch, request))

    def _anthropic_object(self, batch: _Batch, request: web.Request) -> dict[str, Any]:
        done = self._complete(batch)
        counts = {
            "processing": 0 if done else len(batch.requests),
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
        for result in batch.results or []:
            kind = (
                "succeeded" if "error" not in result else "expired" if result["error"] == "batch_expired" else "errored"
            )
            counts[kind] += 1
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if done else "in_progress",
            "request_counts": counts,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch.created_unix)),
            "results_url": f"{request.url.origin()}/v1/messages/batches/{batch.id}/results" if done else None,
        }

    async def get_anthropic(self, request: web.Request) -> web.Response:
        """GET /v1/messages/batches/{id}."""
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch.kind != "anthropic":
            return _error(404, f"No such message batch: {request.match_info['id']}")
        return web.json_response(self._anthropic_object(batch, request))

    async def list_anthropic(self, request: web.Request) -> web.Response:
        """GET /v1/messages/batches?limit=&after_id=: newest first."""
        page, more = self._listing(request, "anthropic")
        data = [self._anthropic_object(b, request) for b in page]
        return web.json_response({"data": data, "has_more": more, "last_id": data[-1]["id"] if data else None})

    async def results_anthropic(self, request: web.Request) -> web.Response:
        """GET /v1/messages/batches/{id}/results: one JSON line per request, once the batch has ended."""
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch.kind != "anthropic" or not self._complete(batch) or batch.results is None:
            return _error(404, "results are not available (unknown batch, or still processing)")
        lines = []
        for (custom_id, body), result in zip(batch.requests, batch.results, strict=True):
            if "error" not in result:
                outcome = {"type": "succeeded", "message": _message(result["body"], body)}
            elif result["error"] == "batch_expired":
                outcome = {"type": "expired"}
            else:
                outcome = {"type": "errored", "error": {"type": "api_error", "message": result["message"]}}
            lines.append(json.dumps({"custom_id": custom_id, "result": outcome}) + "\n")
        return web.Response(body="".join(lines).encode(), content_type="application/binary")

    # ---- Gemini ------------------------------------------------------------------------------------------

    async def create_gemini(self, request: web.Request) -> web.Response:
        """POST /v1beta/models/{model}:batchGenerateContent with inlined, keyed requests."""
        model, _, method = request.match_info["target"].partition(":")
        if method != "batchGenerateContent":
            return _error(404, f"the simulator serves Gemini only in batch mode, not {method or 'this path'}")
        try:
            batch = (await request.json())["batch"]
            items = batch["inputConfig"]["requests"]["requests"]
            requests = [(str(i["metadata"]["key"]), _gemini_chat_body(model, dict(i["request"]))) for i in items]
        except (ValueError, KeyError, TypeError):
            return _error(400, "batch.inputConfig.requests.requests must be a list of {request, metadata.key}")
        if not requests or len({k for k, _ in requests}) < len(requests):
            return _error(400, "a batch holds at least one request, with unique metadata.key values")
        created = self._new_batch("gemini", requests, {"displayName": str(batch.get("displayName", ""))})
        return web.json_response(self._gemini_operation(created))

    def _gemini_operation(self, batch: _Batch) -> dict[str, Any]:
        done = self._complete(batch)
        state = ("BATCH_STATE_EXPIRED" if batch.expires else "BATCH_STATE_SUCCEEDED") if done else "BATCH_STATE_RUNNING"
        op: dict[str, Any] = {
            "name": f"batches/{batch.id}",
            "metadata": {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                "displayName": batch.metadata.get("displayName"),
                "state": state,
                "createTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch.created_unix)),
            },
            "done": done,
        }
        if done and batch.results is not None:
            inlined = []
            for (key, _), result in zip(batch.requests, batch.results, strict=True):
                if "error" in result:
                    inlined.append({"error": {"code": 500, "message": result["message"]}, "metadata": {"key": key}})
                else:
                    inlined.append({"response": _gemini_response(result["body"]), "metadata": {"key": key}})
            op["response"] = {"inlinedResponses": {"inlinedResponses": inlined}}
        return op

    async def get_gemini(self, request: web.Request) -> web.Response:
        """GET /v1beta/batches/{id}: the batch as an operation (its responses inlined once done)."""
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch.kind != "gemini":
            return _error(404, f"No such batch: {request.match_info['id']}")
        return web.json_response(self._gemini_operation(batch))

    async def list_gemini(self, request: web.Request) -> web.Response:
        """GET /v1beta/batches?pageSize=&pageToken=: newest first."""
        batches = [b for b in reversed(self.batches.values()) if b.kind == "gemini"]
        start = int(request.query.get("pageToken") or 0)
        size = max(1, min(100, int(request.query.get("pageSize", "20"))))
        page = batches[start : start + size]
        body: dict[str, Any] = {"operations": [self._gemini_operation(b) for b in page]}
        if start + size < len(batches):
            body["nextPageToken"] = str(start + size)
        return web.json_response(body)

    async def sim_batches(self, request: web.Request) -> web.Response:
        """GET /sim/batches: batches created and how often each custom_id was submitted (for tests)."""
        repeated = {k: v for k, v in self.submitted.items() if v > 1}
        body: dict[str, Any] = {
            "batches": len(self.batches),
            "requests": sum(len(b.requests) for b in self.batches.values()),
            "distinct_custom_ids": len(self.submitted),
            "submitted_more_than_once": repeated,
        }
        if request.query.get("detail"):  # each batch's ids and which of them got no reply
            body["detail"] = [
                {
                    "id": b.id,
                    "kind": b.kind,
                    "custom_ids": [c for c, _ in b.requests],
                    "failed": [c for (c, _), r in zip(b.requests, b.results or [], strict=False) if "error" in r],
                    "complete": b.results is not None,
                }
                for b in self.batches.values()
            ]
        return web.json_response(body)


def _gemini_chat_body(model: str, request: dict[str, Any]) -> dict[str, Any]:
    """A Gemini GenerateContentRequest as the chat-completions body the respondents read."""
    messages = []
    system = request.get("systemInstruction") or {}
    if system.get("parts"):
        messages.append({"role": "system", "content": "".join(p.get("text", "") for p in system["parts"])})
    for content in request.get("contents", []):
        role = "assistant" if content.get("role") == "model" else "user"
        messages.append({"role": role, "content": "".join(p.get("text", "") for p in content.get("parts", []))})
    config = request.get("generationConfig") or {}
    body: dict[str, Any] = {"model": model, "messages": messages}
    for theirs, ours in (("temperature", "temperature"), ("topP", "top_p"), ("maxOutputTokens", "max_tokens")):
        if theirs in config:
            body[ours] = config[theirs]
    if "seed" in config:
        body["seed"] = config["seed"]
    return body


def _gemini_response(completion: dict[str, Any]) -> dict[str, Any]:
    """A chat completion as the Gemini GenerateContentResponse it stands for."""
    choice = completion["choices"][0]
    usage = completion.get("usage", {})
    finish = {"stop": "STOP", "length": "MAX_TOKENS"}.get(choice.get("finish_reason"), "STOP")
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": choice["message"]["content"]}]}, "finishReason": finish}
        ],
        "usageMetadata": {
            "promptTokenCount": usage.get("prompt_tokens"),
            "candidatesTokenCount": usage.get("completion_tokens"),
        },
        "modelVersion": completion.get("model"),
    }


def _chat_body(params: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages request as the chat-completions body the respondents read."""
    messages = list(params.get("messages", []))
    if params.get("system"):
        messages.insert(0, {"role": "system", "content": params["system"]})
    body = {k: params[k] for k in ("model", "max_tokens", "temperature", "top_p") if k in params}
    return {**body, "messages": messages}


def _message(completion: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion as the Anthropic Message it stands for."""
    choice = completion["choices"][0]
    usage = completion.get("usage", {})
    stop = {"stop": "end_turn", "length": "max_tokens"}.get(choice.get("finish_reason"), "end_turn")
    return {
        "id": completion["id"].replace("chatcmpl", "msg"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": [{"type": "text", "text": choice["message"]["content"]}],
        "stop_reason": stop,
        "usage": {"input_tokens": usage.get("prompt_tokens"), "output_tokens": usage.get("completion_tokens")},
    }
