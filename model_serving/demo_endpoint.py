"""The demo endpoint: an OpenAI-compatible server whose answers are scripted, not a model's.

``make demo`` runs it (``manage.py demo_endpoint``) beside the demo base model
(``model_serving.demo_model``), so that *serve* and *evaluate* work end to end on a machine
without a GPU. It speaks what Tandem uses of vLLM, the same way:

- ``GET /health`` and ``GET /v1/models``: the base model, then every loaded adapter with the
  base as its ``parent``;
- ``POST /v1/load_lora_adapter`` ``{lora_name, lora_path}``: the folder must hold an
  ``adapter_config.json`` (vLLM reads the adapter from the same path); a name is loaded once,
  and a second load says "already been loaded", as vLLM does. At start it loads every adapter
  folder under the adapter directory, as ``vllm serve --lora-modules`` would, so a restart
  keeps the versions it served;
- ``POST /v1/chat/completions``, streamed as server-sent events or as one JSON completion, with
  ``n`` choices: a request for a model it does not serve is a 404, as vLLM answers it.

The answers. Each is UI-TARS-1.5 text for the request's step (the number of assistant turns in
the conversation): click the middle of the screen, type "Hello from Tandem", press Ctrl+S, then
``finished()``. The point is written in UI-TARS-1.5's coordinates for the request's last
screenshot (its size read from the PNG header). Every thought starts with ``DEMO_LABEL`` and
the served model's name, so nobody takes a demo proposal for a model's. The token counts are
estimates (four characters of text a token, ``IMAGE_TOKENS`` an image), labelled as such in
the usage.
"""

import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from model_serving.uitars import DRAFT_PROMPT, smart_resize
from vm_pool.screen.png import png_size

logger = logging.getLogger(__name__)

DEMO_LABEL = "[Demo endpoint: scripted answer, not a model]"
IMAGE_TOKENS = 1000
CHARS_PER_TOKEN = 4
PIECE_CHARS = 12  # streamed in pieces, so the workspace shows the text arriving
FALLBACK_SCREEN = (1280, 800)


@dataclass(frozen=True)
class ScriptedStep:
    thought: str
    action: str  # ``{x}`` and ``{y}`` stand for the middle of the screen in the model's pixels


SCRIPT = (
    ScriptedStep(
        "I click the middle of the screen to focus the window.", "click(start_box='({x},{y})')"
    ),
    ScriptedStep("I type the greeting.", "type(content='Hello from Tandem')"),
    ScriptedStep("I save with Ctrl+S.", "hotkey(key='ctrl s')"),
    ScriptedStep("The script is over.", "finished(content='The demo script is over.')"),
)


def scripted_answer(body: dict[str, Any], model: str) -> str:
    """The UI-TARS text answering one chat request (a scripted draft, asked for a thought)."""
    messages = body.get("messages") or []
    if _asks_for_a_thought(messages):
        return f"Thought: {DEMO_LABEL} {model}: I take this step because it moves the task on."
    step = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    scripted = SCRIPT[min(step, len(SCRIPT) - 1)]
    width, height = last_screen_size(messages)
    resized_height, resized_width = smart_resize(height, width)
    action = scripted.action.format(x=resized_width // 2, y=resized_height // 2)
    return f"Thought: {DEMO_LABEL} {model}: {scripted.thought}\nAction: {action}"


def _asks_for_a_thought(messages: list[Any]) -> bool:
    last = messages[-1] if messages else None
    content = last.get("content") if isinstance(last, dict) else None
    texts = [part.get("text", "") for part in content or [] if isinstance(part, dict)]
    return any(text.startswith(DRAFT_PROMPT[:40]) for text in texts if isinstance(text, str))


def last_screen_size(messages: list[Any]) -> tuple[int, int]:
    """(width, height) of the last PNG screenshot in the conversation."""
    for message in reversed(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for part in reversed(content if isinstance(content, list) else []):
            url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
            if size := png_size_of(url):
                return size
    return FALLBACK_SCREEN


def png_size_of(data_uri: str) -> tuple[int, int] | None:
    """The size of the PNG a data URI holds, from its first bytes; None for anything else."""
    if not data_uri.startswith("data:image/png;base64,"):
        return None
    try:
        return png_size(base64.b64decode(data_uri[len("data:image/png;base64,") :][:44]))
    except (binascii.Error, ValueError):  # NotAPng is a ValueError
        return None


def estimated_prompt_tokens(messages: list[Any]) -> int:
    tokens = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        parts = content if isinstance(content, list) else [{"text": str(content or "")}]
        for part in parts:
            if isinstance(part, dict) and "image_url" in part:
                tokens += IMAGE_TOKENS
            elif isinstance(part, dict):
                tokens += len(str(part.get("text", ""))) // CHARS_PER_TOKEN
    return tokens


@dataclass
class DemoEndpoint:
    """What the server serves: the base model's name and the adapters loaded so far."""

    base_model: str
    adapters: dict[str, str] = field(default_factory=dict)  # name -> folder
    lock: threading.Lock = field(default_factory=threading.Lock)

    def load_adapters_under(self, folder: Path) -> None:
        for config in sorted(folder.glob("*/adapter_config.json")):
            self.adapters.setdefault(config.parent.name, str(config.parent))

    def models(self) -> dict[str, Any]:
        base = {"id": self.base_model, "object": "model", "owned_by": "tandem-demo"}
        with self.lock:
            loaded = sorted(self.adapters.items())
        adapters = [
            {"id": name, "object": "model", "root": path, "parent": self.base_model}
            for name, path in loaded
        ]
        return {"object": "list", "data": [base, *adapters]}

    def load_adapter(self, body: Any) -> tuple[int, dict[str, Any]]:
        name = body.get("lora_name") if isinstance(body, dict) else None
        path = body.get("lora_path") if isinstance(body, dict) else None
        if not isinstance(name, str) or not isinstance(path, str) or not name or not path:
            return 400, error("lora_name and lora_path are required")
        if not (Path(path) / "adapter_config.json").is_file():
            return 400, error(f"No adapter found at {path}")
        with self.lock:
            if name in self.adapters:
                return 400, error(f"The lora adapter '{name}' has already been loaded.")
            self.adapters[name] = path
        logger.info("loaded adapter %s from %s", name, path)
        return 200, {"message": f"Success: LoRA adapter '{name}' added successfully."}

    def serves(self, model: str) -> bool:
        with self.lock:
            return model == self.base_model or model in self.adapters


def error(message: str) -> dict[str, Any]:
    return {"error": {"message": message}}


def usage(body: dict[str, Any], texts: list[str]) -> dict[str, Any]:
    prompt = estimated_prompt_tokens(body.get("messages") or [])
    completion = sum(len(text) for text in texts) // CHARS_PER_TOKEN
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "estimated": True,
    }


def stream_chunks(
    texts: list[str],
    model: str,
    usage_of_request: dict[str, Any] | None,
    piece_chars: int = PIECE_CHARS,
    finish_reason: str = "stop",
) -> Iterator[dict[str, Any]]:
    """The stream vLLM sends: a role delta per choice, the texts in pieces round-robin, a
    finish per choice, then the usage chunk when it was asked for."""

    def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict:
        return {
            "id": "chatcmpl-demo",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": usage,
        }

    for index in range(len(texts)):
        delta = {"role": "assistant", "content": ""}
        yield chunk([{"index": index, "delta": delta, "finish_reason": None}])
    longest = max((len(text) for text in texts), default=0)
    for start in range(0, longest, piece_chars):
        for index, text in enumerate(texts):
            if piece := text[start : start + piece_chars]:
                yield chunk([{"index": index, "delta": {"content": piece}, "finish_reason": None}])
    for index in range(len(texts)):
        yield chunk([{"index": index, "delta": {}, "finish_reason": finish_reason}])
    if usage_of_request is not None:
        yield chunk([], usage_of_request)


def handler_for(endpoint: DemoEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # One request per connection: a stream ends when the connection closes.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s " + format, self.address_string(), *args)

        def do_GET(self) -> None:
            if self.path == "/health":
                self.send_json(200, {})
            elif self.path == "/v1/models":
                self.send_json(200, endpoint.models())
            else:
                self.send_json(404, error(f"no route {self.path}"))

        def do_POST(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            except ValueError:
                self.send_json(400, error("the body is not JSON"))
                return
            if self.path == "/v1/load_lora_adapter":
                self.send_json(*endpoint.load_adapter(body))
            elif self.path == "/v1/chat/completions" and isinstance(body, dict):
                self.complete(body)
            else:
                self.send_json(404, error(f"no route {self.path}"))

        def complete(self, body: dict[str, Any]) -> None:
            model = str(body.get("model") or endpoint.base_model)
            if not endpoint.serves(model):
                self.send_json(404, error(f"The model `{model}` does not exist."))
                return
            n = body.get("n") or 1
            if not isinstance(n, int) or not 1 <= n <= 16:
                self.send_json(400, error("n must be an integer from 1 to 16"))
                return
            texts = [scripted_answer(body, model)] * n
            if not body.get("stream"):
                self.send_json(200, completion(texts, model, usage(body, texts)))
                return
            wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            counted = usage(body, texts) if wants_usage else None
            try:
                for chunk in stream_chunks(texts, model, counted):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up

        def send_json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def completion(
    texts: list[str], model: str, usage_of_request: dict[str, Any], finish_reason: str = "stop"
) -> dict[str, Any]:
    """One non-streamed chat completion with a choice per text."""
    return {
        "id": "chatcmpl-demo",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": t},
                "finish_reason": finish_reason,
            }
            for i, t in enumerate(texts)
        ],
        "usage": usage_of_request,
    }


def make_server(endpoint: DemoEndpoint, host: str, port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), handler_for(endpoint))
    server.daemon_threads = True
    return server
