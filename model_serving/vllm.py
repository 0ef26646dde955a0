"""Serving UI-TARS with vLLM: the one `vllm serve` command, and a probe of a running endpoint.

``serve_command`` builds the command that ``manage.py serve_model`` runs and that the compose
``vllm`` service runs (its test checks that the two agree), so the flags live in one place:

- ``--limit-mm-per-prompt '{"image": 5}'``: a request carries the last five screenshots (the
  current one included), as UI-TARS's own inference code sends them. The JSON form is the one
  current vLLM takes.
- ``--max-model-len 32768``: a 1920x1080 screenshot is smart-resized (sides multiples of 28,
  see ``model_serving.uitars.smart_resize``) to 1932x1092, which is 69 x 39 = 2,691 squares of
  28x28 pixels. The vision encoder cuts 14-pixel patches and merges each 2x2 of them into one
  token, so the image is 2,691 tokens, plus ``<|vision_start|>`` and ``<|vision_end|>``:
  2,693. Five of them are 13,465 tokens. The text (system turn and prompt, under 600
  tokens; one assistant turn of about 100 tokens per earlier step; the answer, ``max_tokens``
  512 by default) fits in the rest of 32,768 for episodes of well over a hundred steps. Five
  2560x1440 screenshots (4,641 tokens each) still fit; five 4K screenshots (10,549 each) do
  not.
- ``--enable-lora --max-loras 4 --max-lora-rank 64`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``
  in the environment: a fine-tuned adapter is loaded into the running server with
  ``POST /v1/load_lora_adapter`` and asked for by its name, without a restart.
- ``--lora-modules name=path …`` (when asked): adapters of registered model versions loaded at
  start, each served under its version's name, as a runtime load would.
- ``--enable-prefix-caching``: consecutive steps of an episode share the prompt and most of the
  history, screenshots included, so their prefill is mostly cached.
- ``--served-model-name``: the name a project's ``model_settings["model"]`` must give.

``--trust-remote-code`` is not needed: UI-TARS-1.5-7B is a ``Qwen2_5_VLForConditionalGeneration``
checkpoint, an architecture that vLLM and transformers implement themselves.

``endpoint_health`` asks a running OpenAI-compatible server for ``GET {base_url}/models``
(vLLM also answers ``GET /health`` at its root, which the compose health check uses). It never
raises: a failure is an ``EndpointHealth`` with ``ok=False``, a status (``unreachable``, or
``error`` with the HTTP status) and a reason in Tandem's words, never the exception's text or
the endpoint's answer.
"""

import json
import shlex
import time
from dataclasses import dataclass, field
from enum import StrEnum

import httpx

DEFAULT_MODEL = "ByteDance-Seed/UI-TARS-1.5-7B"


@dataclass(frozen=True)
class ServeCommand:
    """The argv of `vllm serve` and the variables to add to its environment."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """The command as one shell line, environment first."""
        assignments = [f"{name}={shlex.quote(value)}" for name, value in self.env.items()]
        return " ".join([*assignments, shlex.join(self.argv)])


def serve_command(
    model: str = DEFAULT_MODEL,
    *,
    port: int = 8000,
    served_name: str | None = None,
    max_model_len: int = 32768,
    images_per_prompt: int = 5,
    lora: bool = True,
    max_loras: int = 4,
    max_lora_rank: int = 64,
    prefix_caching: bool = True,
    gpu_memory_utilization: float = 0.9,
    lora_modules: dict[str, str] | None = None,
    extra: tuple[str, ...] | list[str] = (),
) -> ServeCommand:
    """The `vllm serve` command for ``model``; ``served_name`` defaults to the model's id.
    ``lora_modules`` (name → adapter folder) are loaded at start, each served by its name."""
    argv = [
        "vllm",
        "serve",
        model,
        "--served-model-name",
        served_name or model,
        "--port",
        str(port),
        "--limit-mm-per-prompt",
        json.dumps({"image": images_per_prompt}),
        "--max-model-len",
        str(max_model_len),
        "--gpu-memory-utilization",
        str(gpu_memory_utilization),
        # Prefix caching is on by default in current vLLM; the flag says so either way.
        "--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching",
    ]
    env = {}
    if lora:
        argv += ["--enable-lora", "--max-loras", str(max_loras)]
        argv += ["--max-lora-rank", str(max_lora_rank)]
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        if lora_modules:
            argv += ["--lora-modules", *(f"{n}={p}" for n, p in sorted(lora_modules.items()))]
    elif lora_modules:
        raise ValueError("LoRA modules need LoRA enabled")
    return ServeCommand(argv=[*argv, *extra], env=env)


class EndpointStatus(StrEnum):
    OK = "ok"
    UNREACHABLE = "unreachable"  # no HTTP answer: refused, timed out, unknown name, bad TLS
    ERROR = "error"  # an answer that is not a list of models, or a failure of Tandem's own


@dataclass(frozen=True)
class EndpointHealth:
    """What a model endpoint answered: the models it serves and how fast, or why it is not
    healthy, in Tandem's words. The exception and the endpoint's own text are never kept: the
    probe goes wherever a project's settings point, and must not tell what listens there."""

    ok: bool
    status: EndpointStatus
    models: list[str] = field(default_factory=list)
    latency_ms: int | None = None
    http_status: int | None = None
    error: str | None = None


def endpoint_health(base_url: str, timeout: float = 3, api_key: str = "") -> EndpointHealth:
    """``GET {base_url}/models`` within ``timeout`` seconds, the models listed or the failure."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    started = time.perf_counter()
    try:
        response = httpx.get(f"{base_url.rstrip('/')}/models", headers=headers, timeout=timeout)
    except httpx.HTTPError:
        # No latency either: a refusal and a timeout would tell apart a closed and a filtered port.
        return EndpointHealth(
            False, EndpointStatus.UNREACHABLE, error="the endpoint could not be reached"
        )
    latency_ms = round((time.perf_counter() - started) * 1000)
    code = response.status_code
    if code != 200:
        return EndpointHealth(
            False,
            EndpointStatus.ERROR,
            latency_ms=latency_ms,
            http_status=code,
            error=f"the endpoint answered HTTP {code}",
        )
    try:
        models = [str(model["id"]) for model in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return EndpointHealth(
            False,
            EndpointStatus.ERROR,
            latency_ms=latency_ms,
            http_status=code,
            error="the answer is not an OpenAI list of models",
        )
    return EndpointHealth(
        True, EndpointStatus.OK, models=models, latency_ms=latency_ms, http_status=code
    )
