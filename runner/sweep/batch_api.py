"""Provider batch APIs over HTTP: submit a batch, find one again by its tag, poll it, read its results.

Gemini: the requests go inline into ``POST /models/{model}:batchGenerateContent`` (``displayName`` = the tag,
``metadata.key`` = the cell key) and the batch is polled as the operation ``batches/{id}``; its inlined responses
come back in the operation.

OpenAI (and compatible servers): the requests go up as a JSONL file (``POST /files``, purpose ``batch``), a batch
is created over it (``POST /batches``, tagged in ``metadata.hofcat_batch``), polled (``GET /batches/{id}``) and
its output and error files read (``GET /files/{id}/content``); ``custom_id`` is the cell key. Anthropic: one
``POST /messages/batches`` with the requests inline, polled, its results streamed as JSONL; Anthropic batches
carry no metadata, so each ``custom_id`` is ``<tag>_<cell key>`` and a batch found again after a crash is
verified by its results' ids before any of them is used.

Errors are ``RequestError``\\s with the key (and any 8-character run of it) redacted; redirects are not followed.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from yarl import URL

from runner.errors import FatalRequestError, RequestError, ServerError, TransportError
from runner.sweep.providers import HttpCall
from runner.sweep.transport import RawReply, failure_text, redact

__all__ = ["BatchAPI", "BatchResult", "BatchStatus", "batch_api"]

OPENAI_TERMINAL = frozenset({"completed", "expired", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """A provider batch as last seen: its status word, whether it is over, its creation time (Unix s)."""

    batch_id: str
    status: str
    ended: bool
    created_unix: float | None
    tag: str | None  # what the provider holds of hofcat's tag (OpenAI metadata), else None


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One request's result: the reply as an online call would have got it, or why it has none."""

    custom_id: str
    reply: RawReply | None
    error: str | None  # e.g. "batch_expired", "server_error: …", "expired", "canceled"


class BatchAPI(Protocol):
    """What the batch runner needs of a provider's batch API."""

    max_requests: int
    max_bytes: int

    def custom_id(self, tag: str, cell_key: str) -> str:
        """The ``custom_id`` of one cell in batch ``tag``."""
        ...

    def cell_key(self, tag: str, custom_id: str) -> str | None:
        """The cell key in ``custom_id`` when it belongs to batch ``tag``, else None."""
        ...

    async def submit(self, tag: str, calls: Sequence[tuple[str, HttpCall]], on_file: Any) -> str:
        """Create a batch of (custom_id, call); ``on_file(file_id)`` is called after an upload; the batch id."""
        ...

    async def find(self, tag: str, since_unix: float, exclude: set[str]) -> list[BatchStatus]:
        """Batches that may be batch ``tag`` (created since ``since_unix``, not in ``exclude``), newest first."""
        ...

    async def status(self, batch_id: str) -> BatchStatus:
        """The batch's current status."""
        ...

    async def results(self, batch_id: str) -> list[BatchResult]:
        """Every request's result of an ended batch."""
        ...

    async def close(self) -> None:
        """Release the HTTP session."""
        ...


class _Http:
    """One aiohttp session for a batch API: JSON or multipart requests, classified and redacted errors."""

    def __init__(self, base_url: str, headers: dict[str, str], secret: str | None, timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        self.secret = secret
        import aiohttp  # only when a batch endpoint runs

        # no cookie jar: as the chat transport, an API needs none, and a server's Set-Cookie would be sent back
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout_s), cookie_jar=aiohttp.DummyCookieJar()
        )

    async def request(self, method: str, path: str, *, json_body: Any = None, data: Any = None) -> bytes:
        import aiohttp

        url = path if path.startswith("http") else f"{self.base_url}{path}"
        try:
            async with self.session.request(
                method, url, json=json_body, data=data, headers=self.headers, allow_redirects=False
            ) as response:
                body = await response.read()
                status = response.status
        except TimeoutError:
            raise TransportError(f"{method} {path}: timed out") from None
        except aiohttp.ClientError as exc:
            raise TransportError(f"{method} {path}: {failure_text(exc, self.secret)}") from None
        if 200 <= status < 300:
            return body
        text = redact(body[:4096].decode("utf-8", "replace"), [self.secret])[:300]
        kind = ServerError if status in (408, 429) or status >= 500 else FatalRequestError
        raise kind(f"{method} {path}: HTTP {status}: {text}", status=status)

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        body = await self.request(method, path, **kwargs)
        try:
            return json.loads(body)
        except ValueError:
            raise ServerError(f"{method} {path}: the reply is not JSON") from None


def _lines(data: bytes) -> Iterator[dict[str, Any]]:
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a damaged line: its cell counts as without a result and is resubmitted
            if isinstance(item, dict):
                yield item


class OpenAIBatchAPI:
    """OpenAI's Files + Batches API (also served by the simulator, and by vLLM-style servers that copy it)."""

    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, base_url: str, call_headers: dict[str, str], secret: str | None, timeout_s: float) -> None:
        self.http = _Http(base_url, call_headers, secret, timeout_s)

    def custom_id(self, tag: str, cell_key: str) -> str:
        return cell_key

    def cell_key(self, tag: str, custom_id: str) -> str | None:
        return custom_id

    async def submit(self, tag: str, calls: Sequence[tuple[str, HttpCall]], on_file: Any) -> str:
        lines = [
            json.dumps({"custom_id": cid, "method": "POST", "url": URL(c.url).path, "body": c.body}, ensure_ascii=False)
            for cid, c in calls
        ]
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        payload = io.BytesIO(("\n".join(lines) + "\n").encode())  # a file object: aiohttp streams it
        form.add_field("file", payload, filename=f"{tag}.jsonl", content_type="application/jsonl")
        uploaded = await self.http.json("POST", "/files", data=form)
        on_file(uploaded["id"])
        endpoint = URL(calls[0][1].url).path
        created = await self.http.json(
            "POST",
            "/batches",
            json_body={
                "input_file_id": uploaded["id"],
                "endpoint": endpoint,
                "completion_window": "24h",
                "metadata": {"hofcat_batch": tag},
            },
        )
        return str(created["id"])

    def _status(self, obj: dict[str, Any]) -> BatchStatus:
        status = str(obj.get("status"))
        tag = (obj.get("metadata") or {}).get("hofcat_batch") if isinstance(obj.get("metadata"), dict) else None
        return BatchStatus(str(obj["id"]), status, status in OPENAI_TERMINAL, obj.get("created_at"), tag)

    async def find(self, tag: str, since_unix: float, exclude: set[str]) -> list[BatchStatus]:
        after, found = None, []
        while True:
            page = await self.http.json("GET", "/batches?limit=100" + (f"&after={after}" if after else ""))
            for obj in page.get("data", []):
                status = self._status(obj)
                if status.tag == tag and status.batch_id not in exclude:
                    found.append(status)
            data = page.get("data") or []
            oldest = data[-1].get("created_at") if data else None
            if not page.get("has_more") or not data or (oldest is not None and oldest < since_unix - 3600):
                return found
            after = data[-1]["id"]

    async def status(self, batch_id: str) -> BatchStatus:
        return self._status(await self.http.json("GET", f"/batches/{batch_id}"))

    async def results(self, batch_id: str) -> list[BatchResult]:
        obj = await self.http.json("GET", f"/batches/{batch_id}")
        out: list[BatchResult] = []
        if obj.get("output_file_id"):
            for item in _lines(await self.http.request("GET", f"/files/{obj['output_file_id']}/content")):
                response = item.get("response") or {}
                body = json.dumps(response.get("body")).encode()
                out.append(
                    BatchResult(str(item.get("custom_id")), RawReply(int(response.get("status_code", 0)), body), None)
                )
        if obj.get("error_file_id"):
            for item in _lines(await self.http.request("GET", f"/files/{obj['error_file_id']}/content")):
                error = item.get("error") or {}
                if item.get("response"):  # a request that got an HTTP error reply: keep it as a reply
                    response = item["response"]
                    body = json.dumps(response.get("body")).encode()
                    out.append(
                        BatchResult(
                            str(item.get("custom_id")), RawReply(int(response.get("status_code", 0)), body), None
                        )
                    )
                else:
                    message = f"{error.get('code')}: {error.get('message')}"
                    out.append(BatchResult(str(item.get("custom_id")), None, message))
        return out

    async def close(self) -> None:
        await self.http.session.close()


class AnthropicBatchAPI:
    """Anthropic's Message Batches API."""

    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    def __init__(self, base_url: str, call_headers: dict[str, str], secret: str | None, timeout_s: float) -> None:
        self.http = _Http(base_url, call_headers, secret, timeout_s)
        self.http.headers["Content-Type"] = "application/json"

    def custom_id(self, tag: str, cell_key: str) -> str:
        return f"{tag}_{cell_key}"

    def cell_key(self, tag: str, custom_id: str) -> str | None:
        prefix = f"{tag}_"
        return custom_id[len(prefix) :] if custom_id.startswith(prefix) else None

    async def submit(self, tag: str, calls: Sequence[tuple[str, HttpCall]], on_file: Any) -> str:
        requests = [{"custom_id": cid, "params": c.body} for cid, c in calls]
        payload = io.BytesIO(json.dumps({"requests": requests}).encode())
        created = await self.http.json("POST", "/messages/batches", data=payload)
        return str(created["id"])

    def _status(self, obj: dict[str, Any]) -> BatchStatus:
        created = obj.get("created_at")
        try:
            when = datetime.fromisoformat(str(created)).timestamp() if created else None
        except ValueError:
            when = None
        status = str(obj.get("processing_status"))
        return BatchStatus(str(obj["id"]), status, status == "ended", when, None)

    async def find(self, tag: str, since_unix: float, exclude: set[str]) -> list[BatchStatus]:
        after, found = None, []
        while True:
            page = await self.http.json("GET", "/messages/batches?limit=100" + (f"&after_id={after}" if after else ""))
            data = page.get("data") or []
            for obj in data:
                status = self._status(obj)
                recent = status.created_unix is None or status.created_unix >= since_unix - 120
                if recent and status.batch_id not in exclude:
                    found.append(status)
            oldest = self._status(data[-1]).created_unix if data else None
            if not page.get("has_more") or not data or (oldest is not None and oldest < since_unix - 120):
                return found
            after = page.get("last_id") or data[-1]["id"]

    async def status(self, batch_id: str) -> BatchStatus:
        return self._status(await self.http.json("GET", f"/messages/batches/{batch_id}"))

    async def results(self, batch_id: str) -> list[BatchResult]:
        out = []
        for item in _lines(await self.http.request("GET", f"/messages/batches/{batch_id}/results")):
            result = item.get("result") or {}
            kind = result.get("type")
            custom_id = str(item.get("custom_id"))
            if kind == "succeeded":
                out.append(BatchResult(custom_id, RawReply(200, json.dumps(result.get("message")).encode()), None))
            else:
                detail = (result.get("error") or {}).get("message") if isinstance(result.get("error"), dict) else None
                out.append(BatchResult(custom_id, None, f"{kind}: {detail}" if detail else str(kind)))
        return out

    async def close(self) -> None:
        await self.http.session.close()


GEMINI_TERMINAL = frozenset(
    {"BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED"}
)


class GeminiBatchAPI:
    """Gemini's batch mode: ``POST /models/{model}:batchGenerateContent`` with inlined requests, each keyed by its
    cell (``metadata.key``), tagged by ``displayName``; polled as ``/batches/{id}`` operations."""

    max_requests = 50_000
    max_bytes = 20 * 1024 * 1024  # inlined requests: the API caps the request size (bigger batches need a file)

    def __init__(self, base_url: str, call_headers: dict[str, str], secret: str | None, timeout_s: float) -> None:
        self.http = _Http(base_url, call_headers, secret, timeout_s)
        self.http.headers["Content-Type"] = "application/json"

    def custom_id(self, tag: str, cell_key: str) -> str:
        return cell_key

    def cell_key(self, tag: str, custom_id: str) -> str | None:
        return custom_id

    async def submit(self, tag: str, calls: Sequence[tuple[str, HttpCall]], on_file: Any) -> str:
        target = URL(calls[0][1].url).path.rsplit("/", 1)[-1].replace(":generateContent", ":batchGenerateContent")
        requests = [{"request": c.body, "metadata": {"key": cid}} for cid, c in calls]
        body = {"batch": {"displayName": tag, "inputConfig": {"requests": {"requests": requests}}}}
        created = await self.http.json("POST", f"/models/{target}", data=io.BytesIO(json.dumps(body).encode()))
        return str(created["name"])  # batches/{id}

    def _status(self, op: dict[str, Any]) -> BatchStatus:
        meta = op.get("metadata") if isinstance(op.get("metadata"), dict) else {}
        state = str(meta.get("state", "BATCH_STATE_PENDING"))
        created = meta.get("createTime")
        try:
            when = datetime.fromisoformat(str(created)).timestamp() if created else None
        except ValueError:
            when = None
        ended = bool(op.get("done")) or state in GEMINI_TERMINAL
        return BatchStatus(str(op["name"]), state, ended, when, meta.get("displayName"))

    async def find(self, tag: str, since_unix: float, exclude: set[str]) -> list[BatchStatus]:
        token, found = None, []
        while True:
            page = await self.http.json("GET", "/batches?pageSize=100" + (f"&pageToken={token}" if token else ""))
            for op in page.get("operations") or page.get("batches") or []:
                status = self._status(op)
                if status.tag == tag and status.batch_id not in exclude:
                    found.append(status)
            token = page.get("nextPageToken")
            if not token:
                return found

    async def status(self, batch_id: str) -> BatchStatus:
        return self._status(await self.http.json("GET", f"/{batch_id}"))

    async def results(self, batch_id: str) -> list[BatchResult]:
        op = await self.http.json("GET", f"/{batch_id}")
        response = op.get("response") if isinstance(op.get("response"), dict) else {}
        inlined = (response.get("inlinedResponses") or {}).get("inlinedResponses") or []
        out = []
        for item in inlined:
            key = str((item.get("metadata") or {}).get("key"))
            if isinstance(item.get("response"), dict):
                out.append(BatchResult(key, RawReply(200, json.dumps(item["response"]).encode()), None))
            else:
                error = item.get("error") if isinstance(item.get("error"), dict) else {}
                out.append(BatchResult(key, None, f"{error.get('code')}: {error.get('message')}"))
        return out

    async def close(self) -> None:
        await self.http.session.close()


def batch_api(provider: str, base_url: str, call: HttpCall, timeout_s: float) -> BatchAPI:
    """The batch API of ``provider`` at ``base_url``, sending the headers (credentials) of ``call``."""
    if provider == "openai":
        return OpenAIBatchAPI(base_url, call.headers, call.secret, timeout_s)
    if provider == "anthropic":
        return AnthropicBatchAPI(base_url, call.headers, call.secret, timeout_s)
    if provider == "gemini":
        return GeminiBatchAPI(base_url, call.headers, call.secret, timeout_s)
    raise RequestError(f"execution = 'batch' is not available for provider {provider!r} (openai, anthropic, gemini)")
