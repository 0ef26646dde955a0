"""The warm pool: desktops kept ready per template, leased in milliseconds, reset off the path.

Rules:

- A desktop's life: ``starting → ready → leased → resetting → ready …``; any step can end in
  ``broken`` (start or reset failed, a health check failed), and broken desktops are stopped
  and replaced, never leased again.
- Leasing takes the longest-ready desktop of the template with
  ``SELECT … FOR UPDATE SKIP LOCKED``: no waiting on other leases, never one desktop twice.
- Releasing bumps the desktop's generation (streams and tokens of the old generation die),
  marks it ``resetting`` and queues the reset on the owning host's worker, after commit.
- A reset holds the desktop's row lock while it runs. A worker that dies mid-reset leaves the
  row ``resetting`` — never leasable — and the host's next maintenance resets it again.
- Each host keeps ``min_ready`` ready desktops of every template its providers can run, up to
  ``max_desktops`` live ones, and is the only one that starts, resets or stops its desktops.
- Displays (and ports derived from them) are allocated in PostgreSQL: a partial unique index
  on (host, display) over live desktops makes a collision impossible, and a retry picks again.
"""

import logging
import secrets
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from backend.celery import send_after_commit
from backend.errors import DomainError
from backend.notifications import notify_user
from vm_pool.actions import ScreenSize
from vm_pool.desktop import DesktopControl, DesktopError, DesktopSpec, Endpoint
from vm_pool.models import (
    LIVE_STATUSES,
    Desktop,
    DesktopHost,
    DesktopStatus,
    DesktopTemplate,
    host_queue,
)
from vm_pool.providers.registry import get_provider

logger = logging.getLogger(__name__)

# A reset or start that has not finished after this long was abandoned by a dead worker.
STALE_TRANSITION = timedelta(seconds=90)


class NoDesktopAvailable(DomainError):
    """Every desktop of the template is busy: a state of the pool the caller may retry against,
    not a fault of the server (409, not 5xx)."""

    status_code = 409
    code = "no_desktop_available"


class DesktopLeaseLost(DomainError):
    status_code = 409
    code = "desktop_lease_lost"


def _rotate_secrets(desktop: Desktop) -> None:
    desktop.agent_key = secrets.token_hex(16)


def spec_for(desktop: Desktop) -> DesktopSpec:
    template = desktop.template
    display = desktop.display
    return DesktopSpec(
        desktop_id=desktop.pk,
        screen=ScreenSize(desktop.width, desktop.height),
        agent_key=desktop.agent_key,
        display=display,
        home_template=Path(template.home_template) if template.home_template else None,
        autostart=tuple(tuple(argv) for argv in template.autostart),
        image=template.image,
        instance_id=desktop.instance_id,
        internet=template.internet,
    )


def template_named(name: str) -> DesktopTemplate:
    template = DesktopTemplate.objects.filter(name=name).first()
    if template is None:
        raise NoDesktopAvailable(f"There is no desktop template named {name!r}.")
    return template


class _CachedControl(NamedTuple):
    generation: int
    instance_id: str
    control: DesktopControl


# Controls are kept per process, one per desktop, of the generation last asked for: connecting
# to a desktop costs more than a step. The lock guards the dict only; it is never held while a
# control connects, acts or closes, so no desktop's I/O ever waits on another's.
_controls: dict[int, _CachedControl] = {}
_controls_lock = threading.Lock()


def control_for(desktop: Desktop) -> DesktopControl:
    """This process's control handle of a running desktop (of its current generation).

    A newer generation's control replaces an older one's, which is closed quietly: its desktop
    was reset and its X server may be gone. A caller holding an older generation than the one
    cached is refused: its desktop was reset since, and may be someone else's now.
    """
    with _controls_lock:
        cached = _controls.get(desktop.pk)
    if cached is not None and _is_for(cached, desktop):
        return cached.control
    _refuse_older(desktop, cached)
    fresh = get_provider(desktop.provider).control(spec_for(desktop), endpoint_of(desktop))
    dropped: DesktopControl | None
    with _controls_lock:  # another thread may have cached one meanwhile
        cached = _controls.get(desktop.pk)
        if cached is not None and (
            _is_for(cached, desktop) or cached.generation > desktop.generation
        ):
            kept, dropped = cached, fresh
        else:
            kept = _controls[desktop.pk] = _CachedControl(
                desktop.generation, desktop.instance_id, fresh
            )
            dropped = cached.control if cached is not None else None
    if dropped is not None:
        _close_quietly(dropped)
    _refuse_older(desktop, kept)
    return kept.control


def _is_for(cached: _CachedControl, desktop: Desktop) -> bool:
    return (cached.generation, cached.instance_id) == (desktop.generation, desktop.instance_id)


def _refuse_older(desktop: Desktop, cached: _CachedControl | None) -> None:
    if cached is not None and cached.generation > desktop.generation:
        raise DesktopError(
            f"desktop {desktop.pk} was reset since this job read it "
            f"(generation {desktop.generation}, now {cached.generation})"
        )


def _close_quietly(control: DesktopControl) -> None:
    """Close a control no job will use again; a failure is logged, never raised to a job."""
    try:
        control.close()
    except Exception:  # its desktop may be gone: the handle is dropped either way
        logger.warning("closing a replaced desktop control failed", exc_info=True)


def forget_control(desktop_id: int) -> None:
    """Close and drop this process's control of a desktop, if it has one (one that stopped)."""
    with _controls_lock:
        cached = _controls.pop(desktop_id, None)
    if cached is not None:
        _close_quietly(cached.control)


def endpoint_of(desktop: Desktop) -> Endpoint:
    return Endpoint(
        instance_id=desktop.instance_id,
        vnc_host=desktop.vnc_host,
        vnc_port=desktop.vnc_port or 0,
        vnc_socket=desktop.vnc_socket,
        screen=ScreenSize(desktop.width, desktop.height),
        display="" if desktop.display is None else f":{desktop.display}",
        control_address=desktop.control_address,
    )


def _set_status(desktop: Desktop, status: str, **fields: Any) -> None:
    desktop.status = status
    desktop.state_changed_at = timezone.now()
    for name, value in fields.items():
        setattr(desktop, name, value)
    desktop.save(update_fields=["status", "state_changed_at", *fields])


# --- creating, starting, resetting, stopping: on the owning host's worker ----------------------


def create_desktop(template: DesktopTemplate, host: str) -> Desktop:
    """A new ``starting`` row with a display allocated on ``host`` (when the provider needs one)."""
    provider = get_provider(template.provider)
    low, high = settings.TANDEM_DISPLAY_RANGE
    for _ in range(10):
        try:
            with transaction.atomic():
                display = None
                if provider.allocates_display:
                    used = set(
                        Desktop.objects.filter(host=host, status__in=LIVE_STATUSES).values_list(
                            "display", flat=True
                        )
                    )
                    display = next((d for d in range(low, high + 1) if d not in used), None)
                    if display is None:
                        raise NoDesktopAvailable(f"host {host} has no free display in {low}–{high}")
                desktop = Desktop(
                    template=template,
                    host=host,
                    provider=template.provider,
                    display=display,
                    width=template.width,
                    height=template.height,
                )
                _rotate_secrets(desktop)
                desktop.save()
                return desktop
        except IntegrityError:
            continue  # another worker took that display a moment ago: pick again
    raise NoDesktopAvailable(f"could not allocate a display on host {host}")


def _apply_endpoint(desktop: Desktop, endpoint: Endpoint) -> None:
    desktop.instance_id = endpoint.instance_id
    desktop.vnc_host = endpoint.vnc_host
    desktop.vnc_port = endpoint.vnc_port or None
    desktop.vnc_socket = endpoint.vnc_socket
    desktop.control_address = endpoint.control_address
    _set_status(
        desktop,
        DesktopStatus.READY,
        instance_id=endpoint.instance_id,
        vnc_host=endpoint.vnc_host,
        vnc_port=endpoint.vnc_port or None,
        vnc_socket=endpoint.vnc_socket,
        control_address=endpoint.control_address,
        health_failures=0,
        broken_reason="",
    )


def _break(desktop: Desktop, reason: str) -> None:
    _set_status(desktop, DesktopStatus.BROKEN, broken_reason=reason[:500])


def start_desktop(desktop_id: int) -> Desktop:
    """Start a ``starting`` desktop; it ends ``ready`` or ``broken``."""
    with transaction.atomic():
        desktop = (
            Desktop.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("template")
            .filter(pk=desktop_id, status=DesktopStatus.STARTING)
            .first()
        )
        if desktop is None:
            return Desktop.objects.get(pk=desktop_id)
        provider = get_provider(desktop.provider)
        try:
            _apply_endpoint(desktop, provider.start(spec_for(desktop)))
        except DesktopError as error:
            _break(desktop, f"start failed: {error}")
    return desktop


def reset_desktop(desktop_id: int) -> Desktop:
    """Reset a ``resetting`` desktop with fresh secrets; it ends ``ready`` or ``broken``."""
    with transaction.atomic():
        desktop = (
            Desktop.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("template")
            .filter(pk=desktop_id, status=DesktopStatus.RESETTING)
            .first()
        )
        if desktop is None:  # someone else is resetting it, or it is not to be reset
            return Desktop.objects.get(pk=desktop_id)
        provider = get_provider(desktop.provider)
        old = spec_for(desktop)
        forget_control(desktop.pk)  # its X connection ends with the old desktop
        _rotate_secrets(desktop)
        desktop.save(update_fields=["agent_key"])
        try:
            provider.stop(old)
            _apply_endpoint(desktop, provider.start(spec_for(desktop)))
        except DesktopError as error:
            _break(desktop, f"reset failed: {error}")
    return desktop


def stop_desktop(desktop_id: int, reason: str = "") -> None:
    with transaction.atomic():
        desktop = (
            Desktop.objects.select_for_update(of=("self",))
            .select_related("template")
            .get(pk=desktop_id)
        )
        if desktop.status == DesktopStatus.STOPPED:
            return
        forget_control(desktop.pk)
        get_provider(desktop.provider).stop(spec_for(desktop))
        _set_status(
            desktop,
            DesktopStatus.STOPPED,
            leased_by=None,
            lease_expires_at=None,
            broken_reason=reason[:500] or desktop.broken_reason,
        )


# --- leasing: on the annotator's path, milliseconds, any process -------------------------------


def lease_desktop(
    template: DesktopTemplate, user: Any, ref: str, seconds: int, host: str | None = None
) -> Desktop:
    """Hand the longest-ready desktop of ``template`` (on ``host``, when given) to ``user``;
    raise if none is ready."""
    now = timezone.now()
    with transaction.atomic():
        ready = Desktop.objects.select_for_update(skip_locked=True).filter(
            template=template, status=DesktopStatus.READY
        )
        if host is not None:
            ready = ready.filter(host=host)
        desktop = ready.order_by("state_changed_at", "id").first()
        if desktop is None:
            raise NoDesktopAvailable(
                f"No {template.name} desktop is ready right now; the pool is starting more."
            )
        _set_status(
            desktop,
            DesktopStatus.LEASED,
            leased_by=user,
            lease_ref=ref,
            leased_at=now,
            lease_expires_at=now + timedelta(seconds=seconds),
        )
    return desktop


def _held_by(user_id: int, generation: int) -> dict[str, Any]:
    """What a desktop row holds while it is leased to ``user_id`` at ``generation`` (not reset
    since): the one rule both checks below apply, to a query and to a row just read."""
    return {"status": DesktopStatus.LEASED, "leased_by_id": user_id, "generation": generation}


def holds_desktop(desktop_id: int, user_id: int, generation: int) -> bool:
    """Is the desktop still leased to ``user_id`` at ``generation`` (not reset since)?"""
    return Desktop.objects.filter(pk=desktop_id, **_held_by(user_id, generation)).exists()


def held_when_read(desktop: Desktop, user_id: int, generation: int) -> bool:
    """``holds_desktop`` of a desktop row just read: as current as a query of its own would be
    at the moment of that read, without one."""
    return all(getattr(desktop, f) == v for f, v in _held_by(user_id, generation).items())


def renew_desktop_lease(
    desktop_id: int,
    user: Any,
    seconds: int,
    generation: int | None = None,
    now: datetime | None = None,
) -> datetime:
    """Extend ``user``'s lease (of ``generation``, when given) to ``seconds`` from now."""
    expires = (now or timezone.now()) + timedelta(seconds=seconds)
    rows = Desktop.objects.filter(pk=desktop_id, status=DesktopStatus.LEASED, leased_by=user)
    if generation is not None:
        rows = rows.filter(generation=generation)
    if rows.update(lease_expires_at=expires) != 1:
        raise DesktopLeaseLost("This desktop is no longer leased to you.")
    return expires


def release_desktop(
    desktop_id: int, user: Any | None = None, generation: int | None = None
) -> bool:
    """End a lease: the desktop's streams die now, its reset runs on its host's worker.

    With ``generation``, only a lease of that generation ends: a caller whose desktop was
    reset meanwhile never ends the next holder's lease."""
    rows = Desktop.objects.filter(pk=desktop_id, status=DesktopStatus.LEASED)
    if user is not None:
        rows = rows.filter(leased_by=user)
    if generation is not None:
        rows = rows.filter(generation=generation)
    changed = rows.update(
        status=DesktopStatus.RESETTING,
        generation=F("generation") + 1,
        leased_by=None,
        lease_ref="",
        lease_expires_at=None,
        state_changed_at=timezone.now(),
    )
    if changed:
        host = Desktop.objects.values_list("host", flat=True).get(pk=desktop_id)
        send_after_commit("vm_pool.jobs.reset_desktop", [desktop_id], host_queue(host))
    return bool(changed)


# --- keeping the pool healthy: periodic, per host ----------------------------------------------


def register_host(host: str, providers: list[str]) -> DesktopHost:
    row, _ = DesktopHost.objects.update_or_create(
        name=host, defaults={"providers": providers, "last_seen_at": timezone.now()}
    )
    return row


def check_health(host: str) -> list[int]:
    """Mark desktops of ``host`` that fail their health check broken; return their ids."""
    broken = []
    for desktop in Desktop.objects.select_related("template").filter(
        host=host, status__in=[DesktopStatus.READY, DesktopStatus.LEASED]
    ):
        health = get_provider(desktop.provider).health(spec_for(desktop))
        now = timezone.now()
        if health.ok:
            Desktop.objects.filter(pk=desktop.pk).update(last_health_at=now, health_failures=0)
            continue
        # Only a desktop still in the state we checked is marked: a concurrent lease or
        # release wins over a stale reading.
        marked = Desktop.objects.filter(pk=desktop.pk, status=desktop.status).update(
            status=DesktopStatus.BROKEN,
            broken_reason=f"health check failed: {health.reason}"[:500],
            last_health_at=now,
            health_failures=F("health_failures") + 1,
            state_changed_at=now,
        )
        if marked:
            broken.append(desktop.pk)
            if desktop.status == DesktopStatus.LEASED and desktop.leased_by_id is not None:
                notify_user(
                    desktop.leased_by_id,
                    "desktop_failed",
                    {"desktop": desktop.pk, "reason": health.reason, "ref": desktop.lease_ref},
                )
    return broken


def maintain_host(host: str) -> dict[str, int]:
    """Stop broken desktops, redo abandoned resets and starts, top each template up to min_ready."""
    stale = timezone.now() - STALE_TRANSITION
    done = {"stopped": 0, "resumed": 0, "started": 0}
    mine = Desktop.objects.filter(host=host)
    for desktop_id in mine.filter(status=DesktopStatus.BROKEN).values_list("pk", flat=True):
        try:
            stop_desktop(desktop_id)
        except DesktopError as error:  # stays broken (never leased); retried next round
            logger.warning("could not stop broken desktop %s: %s", desktop_id, error)
            continue
        done["stopped"] += 1
    for desktop_id in mine.filter(
        status=DesktopStatus.RESETTING, state_changed_at__lt=stale
    ).values_list("pk", flat=True):
        reset_desktop(desktop_id)
        done["resumed"] += 1
    for desktop_id in mine.filter(
        status=DesktopStatus.STARTING, state_changed_at__lt=stale
    ).values_list("pk", flat=True):
        start_desktop(desktop_id)
        done["resumed"] += 1
    providers = DesktopHost.objects.filter(name=host).values_list("providers", flat=True).first()
    templates = DesktopTemplate.objects.filter(provider__in=providers or ["local"]).annotate(
        warm=Count(
            "desktops",
            filter=Q(desktops__host=host)
            & Q(desktops__status__in=[DesktopStatus.READY, DesktopStatus.STARTING]),
        ),
        live=Count(
            "desktops", filter=Q(desktops__host=host) & Q(desktops__status__in=LIVE_STATUSES)
        ),
    )
    for template in templates:
        missing = min(template.min_ready - template.warm, template.max_desktops - template.live)
        for _ in range(max(0, missing)):
            start_desktop(create_desktop(template, host).pk)
            done["started"] += 1
    return done


def recover_host(host: str) -> int:
    """At worker start: nothing of this host is in flight, so every unfinished reset is redone."""
    pending = list(
        Desktop.objects.filter(
            host=host, status__in=[DesktopStatus.RESETTING, DesktopStatus.STARTING]
        ).values_list("pk", "status")
    )
    for desktop_id, status in pending:
        if status == DesktopStatus.RESETTING:
            reset_desktop(desktop_id)
        else:
            start_desktop(desktop_id)
    return len(pending)


def release_lapsed_desktop_leases() -> int:
    lapsed = Desktop.objects.filter(
        status=DesktopStatus.LEASED, lease_expires_at__lt=timezone.now()
    )
    return sum(release_desktop(pk) for pk in lapsed.values_list("pk", flat=True))
