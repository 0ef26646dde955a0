"""The ``openai`` proposer: UI-TARS behind any OpenAI-compatible chat server (vLLM first).

One proposal is one ``POST {base_url}/chat/completions`` with ``stream: true``: the request is
built by ``model_serving.uitars`` (UI-TARS-1.5's prompt, history and screenshots), the answer
arrives as server-sent events and every text delta goes to ``on_text(candidate index, delta)``
as it comes, in order. Best-of-N asks for ``n`` choices in the same request; the server streams
them interleaved and each delta is routed by its ``choice.index``. At the end each choice's text
is parsed into a ``Candidate`` in screen pixels (an unusable answer is a candidate with an
``invalid_reason``, never an exception).

Failures. Each attempt has ``connect_timeout_s`` to connect and ``timeout_s`` in all, from
sending the request to the last event. A timeout, a lost connection, a 5xx, a 408 or a 429, an
error event or a stream that ends without ``[DONE]`` is retried ``retries`` times, waiting
``backoff_s``, then twice that, and so on. Any other 4xx is the request's fault and is not
retried. When nothing is left to try, ``ModelUnavailable`` says what went wrong. An attempt
that fails after some text was already streamed is not retried: the text given to ``on_text``
cannot be taken back, so a second answer would be spliced onto the first.

Concurrency. At most ``concurrency`` requests run at once against one ``base_url``, through an
``asyncio.Semaphore`` shared by every proposer with that ``base_url`` in the same event loop
(the first one created sets its size). It is per process: each web or worker process has its
own, so the server sees at most ``concurrency`` times the number of processes; vLLM queues the
rest itself. The semaphore is held for one attempt, not through the waits between attempts.

What is recorded: the model asked for, its version (``model_version`` when given, else the
``model`` the server reports), the sampling settings sent, prompt and completion tokens (the
stream's final usage event), and the latency from the call to the last event, retries and
waiting for a turn included.
"""

import asyncio
import base64
import contextlib
import json
import secrets
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import httpx

from model_serving.proposers.base import (
    ModelUnavailable,
    OnText,
    ProposalRequest,
    ProposalResult,
    Proposer,
)
from model_serving.tls import trusted
from model_serving.uitars import (
    CoordinateStyle,
    build_messages,
    draft_messages,
    drafted_thought,
    parse_response,
)
from vm_pool.actions import Action

RETRIED_STATUSES = frozenset({408, 429})
ERROR_BODY_CHARS = 300

_limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _spliced(body: dict[str, Any], placeholder: str, screenshots: list[bytes]) -> bytes:
    """``body`` as JSON, each placeholder replaced by its screenshot's data URI, in order."""
    encoded = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    pieces = encoded.split(placeholder.encode())
    spliced = [pieces[0]]
    for png, piece in zip(screenshots, pieces[1:], strict=True):
        spliced += (b"data:image/png;base64,", base64.b64encode(png), piece)
    return b"".join(spliced)


def _endpoint_limit(base_url: str, concurrency: int) -> asyncio.Semaphore:
    per_loop = _limits.setdefault(asyncio.get_running_loop(), {})
    return per_loop.setdefault(base_url, asyncio.Semaphore(concurrency))


class _Retryable(Exception):
    """The server failed in a way that another attempt may not."""


class _Refused(Exception):
    """The server refused the request itself (a 4xx): asking again gives the same answer."""


@dataclass
class _Stream:
    """What one attempt received."""

    texts: dict[int, list[str]] = field(default_factory=dict)
    finish_reasons: dict[int, str] = field(default_factory=dict)
    model: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    delivered: bool = False  # some text went to on_text


class OpenAIProposer(Proposer):
    name: ClassVar[str] = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        style: str = CoordinateStyle.UITARS15,
        temperature: float = 0.0,
        top_p: float | None = None,
        max_tokens: int = 512,
        timeout_s: float = 30,
        connect_timeout_s: float = 5,
        retries: int = 2,
        backoff_s: float = 0.5,
        concurrency: int = 4,
        model_version: str = "",
    ) -> None:
        if retries < 0 or concurrency < 1:
            raise ValueError("retries must be 0 or more and concurrency 1 or more")
        if style not in set(CoordinateStyle):
            known = ", ".join(CoordinateStyle)
            raise ValueError(f"unknown coordinate style {style!r} (known: {known})")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.style = CoordinateStyle(style)
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.concurrency = concurrency
        self.model_version = model_version

    def sampling(self, candidates: int = 1) -> dict[str, Any]:
        """The sampling settings sent with a request, as recorded with its proposal."""
        settings: dict[str, Any] = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "n": candidates,
        }
        if self.top_p is not None:
            settings["top_p"] = self.top_p
        return settings

    def request_body(self, request: ProposalRequest) -> bytes:
        """The exact JSON body posted for this request.

        JSON-encoding megabytes of base64 costs twice what the base64 itself does, so the body
        is encoded with a placeholder for each screenshot's URL and the data URIs are spliced
        in as bytes afterwards: base64 and the ``data:`` prefix need no JSON escaping. The
        placeholder is random, so no text in the request can be taken for one."""
        if request.candidates < 1:
            raise ValueError("a proposal needs at least one candidate")
        placeholder = f"screenshot-{secrets.token_hex(16)}"
        screenshots: list[bytes] = []

        def image_url(png: bytes) -> str:
            screenshots.append(png)
            return placeholder

        body = {
            "model": self.model,
            "messages": build_messages(request, self.style, image_url),
            "stream": True,
            "stream_options": {"include_usage": True},
            **self.sampling(request.candidates),
        }
        return _spliced(body, placeholder, screenshots)

    async def propose(
        self, request: ProposalRequest, on_text: OnText | None = None
    ) -> ProposalResult:
        started = time.perf_counter()
        body = self.request_body(request)
        stream = await self._complete(body, on_text)
        latency_ms = round((time.perf_counter() - started) * 1000)

        candidates = []
        for index in sorted(stream.texts):
            text = "".join(stream.texts[index])
            candidate = parse_response(text, request.screen, self.style, request.platform)
            if not candidate.is_valid and stream.finish_reasons.get(index) == "length":
                cut = f"the answer was cut off at max_tokens={self.max_tokens}: "
                candidate = replace(candidate, invalid_reason=cut + candidate.invalid_reason)
            candidates.append(candidate)
        return ProposalResult(
            candidates=tuple(candidates),
            model_name=self.model,
            model_version=self.model_version or stream.model or self.model,
            sampling=self.sampling(request.candidates),
            prompt_tokens=stream.prompt_tokens,
            completion_tokens=stream.completion_tokens,
            latency_ms=latency_ms,
        )

    async def draft_thought(self, request: ProposalRequest, action: Action) -> str:
        placeholder = f"screenshot-{secrets.token_hex(16)}"
        screenshots: list[bytes] = []

        def image_url(png: bytes) -> str:
            screenshots.append(png)
            return placeholder

        body = {
            "model": self.model,
            "messages": draft_messages(request, action, self.style, image_url),
            "stream": True,
            **self.sampling(1),
        }
        stream = await self._complete(_spliced(body, placeholder, screenshots), None)
        thought = drafted_thought("".join(stream.texts.get(0, [])))
        if not thought:
            raise ModelUnavailable(f"{self.base_url} drafted an empty thought")
        return thought

    async def _complete(self, body: bytes, on_text: OnText | None) -> _Stream:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        timeout = httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s)
        limit = _endpoint_limit(self.base_url, self.concurrency)
        failures: list[str] = []
        async with httpx.AsyncClient(timeout=timeout, headers=headers, verify=trusted()) as client:
            for attempt in range(self.retries + 1):
                if attempt:
                    await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
                stream = _Stream()
                try:
                    async with limit:
                        async with asyncio.timeout(self.timeout_s):
                            await self._attempt(client, body, stream, on_text)
                    return stream
                except _Refused as error:
                    raise ModelUnavailable(
                        f"{self.base_url} refused the request: {error}"
                    ) from None
                except (_Retryable, httpx.TransportError, TimeoutError) as error:
                    failures.append(_describe(error, self.timeout_s))
                    if stream.delivered:
                        raise ModelUnavailable(
                            f"{self.base_url} failed in the middle of its answer: {failures[-1]}"
                        ) from error
        tries = "once" if len(failures) == 1 else f"{len(failures)} times"
        raise ModelUnavailable(f"{self.base_url} failed {tries}: {'; '.join(failures)}")

    async def _attempt(
        self, client: httpx.AsyncClient, body: bytes, stream: _Stream, on_text: OnText | None
    ) -> None:
        url = f"{self.base_url}/chat/completions"
        async with client.stream("POST", url, content=body) as response:
            if response.status_code >= 400:
                message = f"HTTP {response.status_code}: {await _error_text(response)}"
                if response.status_code >= 500 or response.status_code in RETRIED_STATUSES:
                    raise _Retryable(message)
                raise _Refused(message)
            async for event in _events(response):
                if event == "[DONE]":
                    if not stream.texts:
                        raise _Retryable("the answer has no choices")
                    return
                await _take(event, stream, on_text)
        raise _Retryable("the stream ended before [DONE]")


async def _events(response: httpx.Response) -> AsyncIterator[str]:
    """The data of each server-sent event."""
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            yield line[len("data:") :].strip()


async def _take(event: str, stream: _Stream, on_text: OnText | None) -> None:
    """Record one chunk of the stream and hand its text deltas on."""
    try:
        chunk = json.loads(event)
    except json.JSONDecodeError:
        raise _Retryable(f"the server sent an event that is not JSON: {event[:80]!r}") from None
    if not isinstance(chunk, dict):
        raise _Retryable(f"the server sent an event that is not a JSON object: {event[:80]!r}")
    if "error" in chunk or chunk.get("object") == "error":
        error = chunk.get("error", chunk)
        message = error.get("message", error) if isinstance(error, dict) else error
        raise _Retryable(f"the server reported an error: {message}")
    if chunk.get("model"):
        stream.model = chunk["model"]
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        stream.prompt_tokens = usage.get("prompt_tokens")
        stream.completion_tokens = usage.get("completion_tokens")
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict) or not isinstance(choice.get("index", 0), int):
            raise _Retryable(f"the server sent a malformed choice: {event[:80]!r}")
        index = choice.get("index", 0)
        pieces = stream.texts.setdefault(index, [])
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            pieces.append(content)
            if on_text is not None:
                stream.delivered = True
                await on_text(index, content)
        if choice.get("finish_reason"):
            stream.finish_reasons[index] = choice["finish_reason"]


async def _error_text(response: httpx.Response) -> str:
    """The server's own words about an error, short."""
    try:
        text = (await response.aread()).decode(errors="replace").strip()
    except httpx.HTTPError:
        text = ""
    with contextlib.suppress(ValueError):
        error = json.loads(text)
        if isinstance(error, dict):
            inner = error.get("error", error)
            text = str(inner.get("message", inner)) if isinstance(inner, dict) else str(inner)
    return text[:ERROR_BODY_CHARS] or "(no message)"


def _describe(error: Exception, timeout_s: float) -> str:
    if isinstance(error, TimeoutError | httpx.TimeoutException):
        return f"no complete answer within {timeout_s:g} s ({type(error).__name__})"
    if isinstance(error, httpx.TransportError):
        return f"{type(error).__name__}: {str(error) or 'the connection failed'}"
    return str(error)
