"""What every part of the live loop checks before it touches a desktop: does the episode still
own it. An episode owns its desktop at the generation it leased, nothing more; when the desktop
is no longer the annotator's at that generation (its lease ended, it was reset, maybe leased to
someone else), nothing is done on or read from it for the episode.

The bottom of the loop: it imports no other module of the loop.
"""

from django.conf import settings

from annotation.models import Episode
from backend.errors import DomainError
from vm_pool import pool


class EpisodeError(DomainError):
    status_code = 409
    code = "episode_error"


class NotTheAnnotator(DomainError):
    """What only the episode's annotator may do (drive its desktop, write its thoughts)."""

    status_code = 403
    code = "not_the_annotator"


class DesktopNotOwned(DomainError):
    status_code = 409
    code = "desktop_not_owned"


DESKTOP_LOST = "the desktop is no longer this episode's: its lease ended or it was reset"


def desktop_lease_seconds() -> int:
    """An episode's desktop lease outlasts the task's lease by the grace period, so that the
    episode, not the desktop reaper, decides when an absent annotator's desktop goes back."""
    return settings.TANDEM_LEASE_SECONDS + settings.TANDEM_EPISODE_GRACE_SECONDS


def owns_desktop(episode: Episode) -> bool:
    """Is the episode's desktop still leased to its annotator at the generation it leased?"""
    if episode.desktop_id is None or episode.desktop_generation is None:
        return False
    return pool.holds_desktop(episode.desktop_id, episode.annotator_id, episode.desktop_generation)


def owned_when_read(episode: Episode) -> bool:
    """``owns_desktop`` from the desktop row read in the same statement as the episode
    (``select_related("desktop")``): as current as a query of its own at that moment."""
    if episode.desktop is None or episode.desktop_generation is None:
        return False
    return pool.held_when_read(episode.desktop, episode.annotator_id, episode.desktop_generation)
