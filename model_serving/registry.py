"""Which proposer a project uses.

``settings.TANDEM_PROPOSERS`` maps names to dotted paths. A project's ``model_settings`` names
one (``"proposer": "openai"``) with its options (``base_url``, ``model``, sampling …). With no
proposer named and no endpoint configured, the CPU baseline proposes, so that Tandem works end
to end without a GPU.
"""

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from model_serving.proposers.base import Proposer


class ProposerMisconfigured(ValueError):
    """A project's model settings name an unknown proposer or give it options it does not take."""


def proposer_name(model_settings: dict[str, Any]) -> str:
    return model_settings.get("proposer") or (
        "openai" if model_settings.get("base_url") else "baseline"
    )


def get_proposer(model_settings: dict[str, Any]) -> Proposer:
    name = proposer_name(model_settings)
    try:
        cls = import_string(settings.TANDEM_PROPOSERS[name])
    except KeyError:
        known = ", ".join(sorted(settings.TANDEM_PROPOSERS))
        raise ProposerMisconfigured(f"unknown proposer {name!r}; known: {known}") from None
    options = {k: v for k, v in model_settings.items() if k not in ("proposer", "candidates")}
    try:
        return cls(**options)
    except TypeError as error:
        raise ProposerMisconfigured(f"proposer {name!r}: {error}") from error
