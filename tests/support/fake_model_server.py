"""A small OpenAI-compatible model server for tests, scripted reply by reply.

It is a real HTTP server (the standard library's, one thread per connection) on 127.0.0.1 and a
free port, started in a thread of the test process:

- ``POST /v1/chat/completions``: answers with the next scripted ``Reply``, streamed as
  server-sent events (``data: {...}`` chunks, each choice's text in pieces, a usage chunk when
  ``stream_options.include_usage`` asks for it, ``data: [DONE]``) or, without ``stream``, as one
  JSON completion. With ``n`` choices their chunks are interleaved, as vLLM sends them.
- ``GET /v1/models`` and ``GET /health``, as vLLM has them.
- ``POST /v1/load_lora_adapter`` ``{lora_name, lora_path}``, as vLLM with runtime LoRA updating
  has it: the folder must hold an ``adapter_config.json`` (vLLM reads it from the same path),
  a name is loaded once, and a loaded adapter is listed by ``/v1/models`` with its base as
  ``parent``. ``server.refuse_adapters(status, message)`` makes it refuse every load.

A reply can also wait before answering, answer with an HTTP error, hang until the client gives
up, cut the stream before ``[DONE]``, or send an event that is not JSON. Every request received
is kept, with its parsed JSON body, in ``server.requests``. A ``responder`` can choose the reply
from the request instead (say, by the number of earlier steps in the conversation).

    with serving() as server:
        server.script(Reply.text("Thought: …\\nAction: wait()"), Reply.error(500))
        proposer = OpenAIProposer(server.base_url, server.model)
"""

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from model_serving.demo_endpoint import DemoEndpoint, completion, stream_chunks

DEFAULT_MODEL = "ui-tars-1.5-7b"


@dataclass(frozen=True)
class Reply:
    """What the server does with one chat request."""

    texts: tuple[str, ...] = ()  # one per choice; one text serves every choice asked for
    chunk_chars: int = 6  # streamed in pieces of this many characters
    chunk_delay_s: float = 0.0
    delay_s: float = 0.0  # before the response starts
    status: int = 200
    message: str = ""  # the error message of a non-200 reply
    hang: bool = False  # send nothing, until the client disconnects or the server stops
    cut_after_chunks: int | None = None  # close the stream after this many chunks, no [DONE]
    malformed: bool = False  # an event that is not JSON, after the first chunk
    prompt_tokens: int = 1234
    model: str | None = None  # the model name in the chunks; the server's by default
    finish_reason: str = "stop"

    @classmethod
    def text(cls, *texts: str, **options: Any) -> "Reply":
        return cls(texts=texts, **options)

    @classmethod
    def error(cls, status: int, message: str = "") -> "Reply":
        return cls(status=status, message=message or f"scripted error {status}")

    @classmethod
    def hanging(cls) -> "Reply":
        return cls(hang=True)


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body, None for a GET


class FakeModelServer:
    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        self.model = model
        self.requests: list[ReceivedRequest] = []
        self.default: Reply | None = None  # the reply when nothing is scripted; else an HTTP 500
        # Answers from the request itself (its JSON body), before the script: a proposal asked
        # again for the same step (a newer screen) gets the same answer.
        self.responder: Callable[[Any], Reply | None] | None = None
        # Models and LoRA adapters as the demo endpoint keeps them (vLLM's rules).
        self.served = DemoEndpoint(model)
        self.adapters = self.served.adapters  # loaded LoRA adapters: name -> path
        self.adapter_refusal: tuple[int, str] | None = None
        self.in_flight = 0
        self.max_in_flight = 0  # the most chat requests handled at once
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # A short poll interval: stopping the server waits for one poll.
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return self._http.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[ReceivedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def script(self, *replies: Reply) -> None:
        """Queue the replies to the next chat requests, in order."""
        with self._lock:
            self._replies.extend(replies)

    def refuse_adapters(self, status: int, message: str) -> None:
        self.adapter_refusal = (status, message)

    def _load_adapter(self, body: Any) -> tuple[int, dict[str, Any]]:
        if self.adapter_refusal is not None:
            status, message = self.adapter_refusal
            return status, {"error": {"message": message}}
        return self.served.load_adapter(body)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()  # hanging replies return
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def _next_reply(self, body: Any) -> Reply | None:
        if self.responder is not None and (reply := self.responder(body)) is not None:
            return reply
        with self._lock:
            return self._replies.popleft() if self._replies else self.default

    def _record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _enter(self, change: int) -> None:
        with self._lock:
            self.in_flight += change
            self.max_in_flight = max(self.max_in_flight, self.in_flight)


@contextmanager
def serving(model: str = DEFAULT_MODEL) -> Iterator[FakeModelServer]:
    server = FakeModelServer(model)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _handler_for(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, and a stream ends when the connection closes.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            server._record(ReceivedRequest("GET", self.path, dict(self.headers), None))
            if self.path == "/health":
                self._send_json(200, {})
            elif self.path == "/v1/models":
                self._send_json(200, server.served.models())
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            server._record(ReceivedRequest("POST", self.path, dict(self.headers), body))
            if self.path == "/v1/load_lora_adapter":
                self._send_json(*server._load_adapter(body))
                return
            if self.path != "/v1/chat/completions":
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            reply = server._next_reply(body)
            if reply is None:
                self._send_json(500, {"error": {"message": "no reply scripted for this request"}})
                return
            server._enter(+1)
            try:
                self._answer(reply, body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up: that is what some tests are about
            finally:
                server._enter(-1)

        def _answer(self, reply: Reply, body: dict[str, Any]) -> None:
            if reply.hang:
                server._stopping.wait()
                return
            if reply.delay_s:
                server._stopping.wait(reply.delay_s)
            if reply.status != 200:
                self._send_json(reply.status, {"error": {"message": reply.message}})
                return
            n = int(body.get("n") or 1)
            texts = list(reply.texts) * n if len(reply.texts) == 1 else list(reply.texts)
            model = reply.model or server.model
            if not body.get("stream"):
                self._send_json(200, _completion(texts[:n], model, reply))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            for sent, chunk in enumerate(_chunks(texts[:n], model, reply, include_usage)):
                if reply.cut_after_chunks is not None and sent == reply.cut_after_chunks:
                    return
                if reply.malformed and sent == 1:
                    self._event("{this is not json")
                self._event(json.dumps(chunk))
                if reply.chunk_delay_s:
                    time.sleep(reply.chunk_delay_s)
            self._event("[DONE]")

        def _event(self, data: str) -> None:
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        def _send_json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _usage(texts: list[str], reply: Reply) -> dict[str, int]:
    completion_tokens = sum(-(-len(text) // reply.chunk_chars) for text in texts)  # a piece each
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": reply.prompt_tokens + completion_tokens,
    }


def _chunks(
    texts: list[str], model: str, reply: Reply, include_usage: bool
) -> Iterator[dict[str, Any]]:
    usage = _usage(texts, reply) if include_usage else None
    return stream_chunks(texts, model, usage, reply.chunk_chars, reply.finish_reason)


def _completion(texts: list[str], model: str, reply: Reply) -> dict[str, Any]:
    return completion(texts, model, _usage(texts, reply), reply.finish_reason)
