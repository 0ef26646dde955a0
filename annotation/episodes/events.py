"""What an episode's sockets hear: its group's name, telling it an event, and a proposal as the
browser receives it. Every part of the loop tells the workspace through here; it imports no
other module of the loop.
"""

from typing import Any

from annotation.models import Proposal
from backend.notifications import notify_group


def episode_group(episode_id: int) -> str:
    return f"episode-{episode_id}"


def tell(episode_id: int, event: str, payload: dict[str, Any]) -> None:
    notify_group(episode_group(episode_id), event, {"episode": episode_id, **payload})


def proposal_json(proposal: Proposal) -> dict[str, Any]:
    return {
        "rank": proposal.rank,
        "raw_text": proposal.raw_text,
        "thought": proposal.thought,
        "action": proposal.action,
        "invalid_reason": proposal.invalid_reason,
        "model_name": proposal.model_name,
        "model_version": proposal.model_version,
        "latency_ms": proposal.latency_ms,
    }
