"""Model versions on an endpoint: loading an adapter into a running vLLM, checking it is served.

A version with an adapter is served by the vLLM that serves its base model, started with
``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` (``model_serving.vllm``):

1. its adapter files are copied from storage into ``TANDEM_ADAPTER_DIR/<version name>/`` (a
   folder the vLLM host shares: a volume in docker compose), which vLLM sees as
   ``TANDEM_VLLM_ADAPTER_DIR/<version name>``;
2. ``POST {base_url}/load_lora_adapter`` ``{"lora_name": <version name>, "lora_path": …}``;
3. ``GET {base_url}/models`` must list the version's name; only then is it ``serving``.

A version without an adapter is the base model itself: step 3 alone. Starting vLLM with the
adapter instead (``serve_model --lora-modules name=path``) gives the same result at start. An
endpoint that refuses, is unreachable or does not list the version leaves the version
``failed`` with the endpoint's own words in ``serving_error``.
"""

from pathlib import Path

import httpx
from django.conf import settings
from django.utils import timezone

from backend.errors import DomainError
from model_serving.artifacts import MissingArtifacts, download_folder
from model_serving.models import ModelVersion
from model_serving.versions import is_adapter_name
from model_serving.vllm import endpoint_health

LOAD_TIMEOUT_S = 120
ERROR_BODY_CHARS = 300
ALREADY_LOADED = "already been loaded"


class ServingFailed(DomainError):
    status_code = 502
    code = "serving_failed"


def adapter_paths(version: ModelVersion) -> tuple[Path, str]:
    """Where the platform writes the adapter, and the same folder as vLLM sees it."""
    if not is_adapter_name(version.name):
        raise ServingFailed(f"{version.name!r} cannot name an adapter folder")
    local = Path(settings.TANDEM_ADAPTER_DIR) / version.name
    remote = f"{str(settings.TANDEM_VLLM_ADAPTER_DIR).rstrip('/')}/{version.name}"
    return local, remote


def materialize_adapter(version: ModelVersion) -> str:
    """Copy the version's adapter from storage to the shared folder; the path vLLM reads."""
    local, remote = adapter_paths(version)
    try:
        download_folder(version.adapter_location, local)
    except MissingArtifacts as error:
        raise ServingFailed(f"model version {version.name}: {error}") from None
    return remote


def load_lora_adapter(base_url: str, lora_name: str, lora_path: str, api_key: str = "") -> None:
    """Ask a running vLLM to load an adapter; ``ServingFailed`` says why it did not."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/load_lora_adapter"
    try:
        response = httpx.post(
            url,
            json={"lora_name": lora_name, "lora_path": lora_path},
            headers=headers,
            timeout=LOAD_TIMEOUT_S,
        )
    except httpx.HTTPError as error:
        raise ServingFailed(
            f"{url} did not answer: {type(error).__name__}: {error or 'connection failed'}"
        ) from error
    if response.status_code == 200:
        return
    message = _error_text(response)
    if ALREADY_LOADED in message:
        return  # loading is idempotent for us: the listing below is what counts
    hint = ""
    if response.status_code == 404:
        hint = " (is vLLM running with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True?)"
    raise ServingFailed(
        f"{url} refused to load adapter {lora_name!r} from {lora_path}: "
        f"HTTP {response.status_code}: {message}{hint}"
    )


def _error_text(response: httpx.Response) -> str:
    text = response.text.strip()
    try:
        body = response.json()
    except ValueError:
        return text[:ERROR_BODY_CHARS] or "(no message)"
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = str(inner.get("message", inner)) if isinstance(inner, dict) else str(inner)
    return text[:ERROR_BODY_CHARS] or "(no message)"


def serve_version(version: ModelVersion, api_key: str = "") -> ModelVersion:
    """Load the version on its endpoint and check it is listed; the row says how it went."""
    if not version.base_url:
        raise ServingFailed(f"model version {version.name} has no endpoint (base_url) to serve it")
    ModelVersion.objects.filter(pk=version.pk).update(
        serving_status=ModelVersion.Serving.LOADING, serving_error=""
    )
    try:
        if version.adapter_location:
            path = materialize_adapter(version)
            load_lora_adapter(version.base_url, version.name, path, api_key)
        health = endpoint_health(version.base_url, api_key=api_key)
        if not health.ok:
            raise ServingFailed(f"{version.base_url} does not answer: {health.error}")
        if version.served_name not in health.models:
            listed = ", ".join(health.models) or "no model"
            raise ServingFailed(f"{version.base_url} lists {listed}, not {version.served_name}")
    except ServingFailed as error:
        ModelVersion.objects.filter(pk=version.pk).update(
            serving_status=ModelVersion.Serving.FAILED, serving_error=str(error)
        )
        version.refresh_from_db()
        raise
    ModelVersion.objects.filter(pk=version.pk).update(
        serving_status=ModelVersion.Serving.SERVING, serving_error="", served_at=timezone.now()
    )
    version.refresh_from_db()
    return version
