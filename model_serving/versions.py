"""Which model version proposes an episode, and the proposer settings that make it do so.

A project names the version that proposes (A) and may name a second one (B) with the share of
episodes B gets. The choice is a function of the episode id alone — B when the first 8 bytes of
``sha256("tandem-ab:<episode id>")`` fall below ``share`` of 2**64 — so it is the same in every
process and when a step is proposed again after a restart. (The salt differs from the held-out
split's, so that held-out episodes are not all A or all B.)

The proposer settings are the project's own (sampling, timeouts…) with the version's endpoint,
served model name, coordinate style and label on top; the label is recorded on the episode and
on every proposal, which is what acceptance rates per version group by. The project's API key
goes along only when the version is served at the project's own ``base_url``: a key is never
sent to another host (``model_serving.endpoint_keys``).
"""

import hashlib
import re
from typing import Any

from model_serving.endpoint_keys import API_KEY, key_for
from model_serving.models import ModelVersion
from model_serving.uitars import CoordinateStyle

AB_SALT = "tandem-ab:"
# The name of a version with an adapter is also a folder name (TANDEM_ADAPTER_DIR/<name>) and
# vLLM's lora_name: letters, digits, dots, dashes and underscores, nothing that walks folders.
ADAPTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
VERSION_KEYS = ("proposer", "base_url", "model", "model_version", "style")


def served_style(model_settings: dict[str, Any], version: ModelVersion | None) -> str:
    """The coordinate convention answers come in: the version's, else the settings' own."""
    if version is not None:
        return version.coordinate_style
    return str(model_settings.get("style", CoordinateStyle.UITARS15))


def is_adapter_name(name: str) -> bool:
    return bool(ADAPTER_NAME.fullmatch(name)) and ".." not in name


def gets_version_b(episode_id: int, share: float) -> bool:
    digest = hashlib.sha256(f"{AB_SALT}{episode_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


def choose_version(
    episode_id: int, a: ModelVersion | None, b: ModelVersion | None, share_b: float
) -> ModelVersion | None:
    """The version that proposes for this episode (None: the project's own model settings)."""
    if b is not None and share_b > 0 and gets_version_b(episode_id, share_b):
        return b
    return a


def proposer_settings(model_settings: dict[str, Any], version: ModelVersion) -> dict[str, Any]:
    """The project's model settings with the version's endpoint and identity on top, and the
    project's key only where the version is served at the project's endpoint."""
    kept = {k: v for k, v in model_settings.items() if k not in (*VERSION_KEYS, API_KEY)}
    key = key_for(model_settings, version.base_url)
    return {
        **kept,
        **({API_KEY: key} if key else {}),
        "proposer": "openai",
        "base_url": version.base_url,
        "model": version.served_name,
        "model_version": version.name,
        "style": version.coordinate_style,
    }
