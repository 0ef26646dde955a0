"""What the platform shows about a project's model: which proposer, which endpoint, is it up.

For the ``openai`` proposer the endpoint is probed with ``GET {base_url}/models`` (a few
seconds at most, see ``model_serving.vllm.endpoint_health``); it is healthy when it answers
and serves the model the project asks for (a loaded LoRA adapter is listed there too). A failed
probe says ``unreachable`` or ``error`` with the HTTP status, never what the endpoint said. For the
baseline, health is whether ``tesseract`` runs, and its version is shown. Settings that name an
unknown proposer or give it wrong options are reported as unhealthy, with the reason.
"""

import time
from dataclasses import asdict, replace
from typing import Any

from model_serving.proposers.base import ModelUnavailable
from model_serving.proposers.baseline import MODEL_NAME as BASELINE_MODEL
from model_serving.proposers.baseline import BaselineProposer
from model_serving.proposers.openai import OpenAIProposer
from model_serving.registry import ProposerMisconfigured, get_proposer, proposer_name
from model_serving.vllm import EndpointHealth, EndpointStatus, endpoint_health

HEALTH_TIMEOUT_S = 3


def model_status(model_settings: dict[str, Any]) -> dict[str, Any]:
    """``{"proposer", "base_url", "model", "baseline", "health"}`` for these model settings."""
    name = proposer_name(model_settings)
    try:
        proposer = get_proposer(model_settings)
    except ProposerMisconfigured as error:
        health = asdict(EndpointHealth(False, EndpointStatus.ERROR, error=str(error)))
        base_url, model = model_settings.get("base_url"), model_settings.get("model")
        return _status(name, base_url, model, name == "baseline", health)
    if isinstance(proposer, BaselineProposer):
        return _status(name, None, BASELINE_MODEL, True, _baseline_health(proposer))
    if isinstance(proposer, OpenAIProposer):
        serving = asdict(_endpoint_serving(proposer))
        return _status(name, proposer.base_url, proposer.model, False, serving)
    unknown = EndpointHealth(
        False, EndpointStatus.ERROR, error=f"Tandem has no health check for proposer {name!r}"
    )
    return _status(name, None, None, proposer.is_baseline, asdict(unknown))


def _status(
    name: str, base_url: str | None, model: str | None, baseline: bool, health: dict[str, Any]
) -> dict[str, Any]:
    return {
        "proposer": name,
        "base_url": base_url,
        "model": model,
        "baseline": baseline,
        "health": health,
    }


def _endpoint_serving(proposer: OpenAIProposer) -> EndpointHealth:
    health = endpoint_health(proposer.base_url, HEALTH_TIMEOUT_S, proposer.api_key)
    if health.ok and proposer.model not in health.models:
        served = ", ".join(health.models) or "no model"
        error = f"the endpoint serves {served}, not {proposer.model}"
        return replace(health, ok=False, status=EndpointStatus.ERROR, error=error)
    return health


def _baseline_health(proposer: BaselineProposer) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        version = proposer.model_version
    except ModelUnavailable as error:
        unavailable = EndpointHealth(False, EndpointStatus.ERROR, error=str(error))
        return {**asdict(unavailable), "tesseract": None}
    latency_ms = round((time.perf_counter() - started) * 1000)
    health = EndpointHealth(True, EndpointStatus.OK, models=[BASELINE_MODEL], latency_ms=latency_ms)
    return {**asdict(health), "tesseract": version.removeprefix("ocr-")}
