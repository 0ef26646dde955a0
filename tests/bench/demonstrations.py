"""Demonstrations: reducing a person's input to actions, the recording gate's delay, and whether
recorded demonstrations replay.

``demo_reduction_accuracy``: of the intended actions of 200 scripted human-like sessions
(``tests.support.demo_corpus``: curved paths, jitter, typos, key repeat, wheel bursts), the share
the reducer gives back exactly (type and text equal, points within 3 px), in order.

``demo_gate_latency_p95_ms``: inputs of corpus sessions sent as a client sends them (RFB over a
WebSocket) through the deployment's websockify and recording gate to a real sandboxed desktop:
for each input that changes what the X server shows (the pointer's place or buttons, a key's
state), the time from sending it until the X server shows it; the 95th percentile, less the
median of the same inputs injected directly into the X server by this process (the anchor,
``demo_gate_direct_p95_ms``, measured in the same run; ``demo_gate_p95_vs_direct`` is the
ratio of the two whole paths' p95). ``demo_gate_frame_p95_ms``: the same for the inputs before
which the gate grabs and stores the screen (those that may begin a step).

``demo_replay_fidelity``: corpus demonstrations in a text editor (clicks, double clicks, drags,
scrolls, typing), each recorded through the gate on a fresh desktop, reduced to steps on the
frames the gate grabbed (as an ended demonstration is), then replayed on another fresh desktop
with the same setup (``annotation.episodes.replay_check``): the share that replay to the same
screens.
"""

import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

DISPLAYS = (2480, 2499)  # no test, demo or other benchmark desktop uses these
LATENCY_SESSIONS = 12
REPLAY_SESSIONS = 8
MAX_GAP_S = 0.05  # a corpus pause longer than this is shortened: the gate's delay is measured
VISIBLE_WITHIN_S = 2.0
EDITOR = [{"type": "launch", "parameters": {"command": ["mousepad"], "window_timeout": 20}}]

GOALS = {
    "demo_reduction_accuracy": "≥ 0.98",
    "demo_gate_latency_p95_ms": "≤ 15",
    "demo_replay_fidelity": "≥ 0.95",
}


def run() -> dict[str, float | int]:
    from tests.support.demo_corpus import accuracy, corpus
    from vm_pool.recording.reduce import reduce_events

    sessions = corpus(200)
    figures: dict[str, float | int] = {
        "demo_reduction_accuracy": accuracy(sessions, reduce_events),
        "demo_corpus_actions": sum(len(s.intended) for s in sessions),
    }
    figures.update(_live())
    return figures


def _live() -> dict[str, float | int]:
    from tests.bench import fresh_database, setup_django

    setup_django()
    from django.test import override_settings

    local = override_settings(
        TANDEM_DISPLAY_RANGE=DISPLAYS,
        TANDEM_DESKTOP_ROOT=Path(tempfile.mkdtemp(prefix="tandem-bench-demo-desktops-")),
        TANDEM_HOST=f"bench-demo-{uuid.uuid4().hex[:6]}",
        MEDIA_ROOT=Path(tempfile.mkdtemp(prefix="tandem-bench-demo-media-")),
    )
    with fresh_database(), local:
        from django.conf import settings

        from tests.support.live import websockify
        from tests.support.services import free_port

        port = free_port()
        with websockify(port, TANDEM_MEDIA_ROOT=str(settings.MEDIA_ROOT)):
            proxy = f"ws://127.0.0.1:{port}"
            figures = _latency(proxy)
            figures["demo_replay_fidelity"] = _fidelity(proxy)
        return figures


# --- the gate's delay ------------------------------------------------------------------------


class _Session:
    """A desktop of the bench's own, leased, with an open recording, for the block's duration."""

    def __init__(self, name: str, setup: list[dict[str, Any]] | None = None) -> None:
        from django.conf import settings

        from backend.accounts.models import User
        from vm_pool import pool
        from vm_pool.models import DesktopStatus, DesktopTemplate, Recording
        from vm_pool.setup.runner import run_setup

        self.template, _ = DesktopTemplate.objects.get_or_create(
            name="bench-demo", defaults={"width": 1280, "height": 800, "min_ready": 0}
        )
        self.user, _ = User.objects.get_or_create(username=f"bench-{name}")
        desktop = pool.start_desktop(pool.create_desktop(self.template, settings.TANDEM_HOST).pk)
        if desktop.status != DesktopStatus.READY:
            raise RuntimeError(f"the benchmark's desktop did not start: {desktop.broken_reason}")
        self.desktop = pool.lease_desktop(self.template, self.user, name, 3600)
        self.control = pool.control_for(self.desktop)
        if setup:
            run_setup(self.control, setup)
        self.recording = Recording.objects.create(
            desktop=self.desktop,
            user=self.user,
            generation=self.desktop.generation,
            lease_ref=self.desktop.lease_ref,
        )

    def client(self, proxy: str) -> Any:
        from tests.support.rfb_client import RfbClient
        from vm_pool.streaming import issue_control_token

        clear, _ = issue_control_token(self.recording)
        return RfbClient(f"{proxy}/websockify?token={clear}")

    def stop(self) -> None:
        from vm_pool import pool

        pool.stop_desktop(self.desktop.pk)


def _state(display: Any, event: Any) -> Any:
    """What the X server shows of ``event``'s kind now."""
    from vm_pool.recording.reduce import Pointer

    if isinstance(event, Pointer):
        reply = display.screen().root.query_pointer()
        return (reply.root_x, reply.root_y, reply.mask & 0x1F00)
    keycode = display.keysym_to_keycode(event.keysym)
    return bool(display.query_keymap()[keycode // 8] & (1 << (keycode % 8)))


def _expected(display: Any, event: Any) -> Any:
    from vm_pool.recording.reduce import Pointer

    if isinstance(event, Pointer):
        buttons = event.buttons & 0x1F  # buttons 1 to 5 have a mask bit in X
        return (event.x, event.y, buttons << 8)
    return event.down


def _play(events: list[Any], send: Any, display: Any) -> tuple[list[float], list[int]]:
    """Send each event, waiting until the X server shows it; the latencies in ms of those that
    change what it shows, and their positions in ``events``."""
    latencies, positions = [], []
    last_at = events[0].at if events else 0.0
    for position, event in enumerate(events):
        time.sleep(min(MAX_GAP_S, max(0.0, event.at - last_at)))
        last_at = event.at
        wanted = _expected(display, event)
        changes = _state(display, event) != wanted
        started = time.perf_counter()
        send(event)
        if not changes:
            continue
        while _state(display, event) != wanted:
            if time.perf_counter() - started > VISIBLE_WITHIN_S:
                raise RuntimeError(f"input {position} ({event}) never reached the desktop")
        latencies.append((time.perf_counter() - started) * 1000)
        positions.append(position)
    return latencies, positions


def _latency(proxy: str) -> dict[str, float]:
    from Xlib.display import Display

    from tests.support.demo_corpus import corpus
    from vm_pool.desktop import KeyInput, PointerInput
    from vm_pool.recording import rfb
    from vm_pool.recording.reduce import Pointer, StepStarts

    sessions = corpus(LATENCY_SESSIONS)
    direct_ms: list[float] = []
    gated_ms: list[float] = []
    framed_ms: list[float] = []
    bench = _Session("latency")
    display = Display(f":{bench.desktop.display}")
    try:
        # The anchor: the same inputs injected straight into the X server by this process.
        for session in sessions:
            events = _plain(session.events)

            def inject(event: Any) -> None:
                bench.control.inject(
                    PointerInput(event.x, event.y, event.buttons)
                    if isinstance(event, Pointer)
                    else KeyInput(event.keysym, event.down)
                )

            direct_ms += _play(events, inject, display)[0]
        client = bench.client(proxy)
        for session in sessions:
            events = _plain(session.events)

            def send(event: Any) -> None:
                if isinstance(event, Pointer):
                    client.send(rfb.pointer_event(event.x, event.y, event.buttons))
                else:
                    client.send(rfb.key_event(event.keysym, event.down))

            latencies, positions = _play(events, send, display)
            starts = StepStarts()
            begins = {i for i, event in enumerate(events) if starts.add(event)}
            gated_ms += latencies
            framed_ms += [ms for ms, i in zip(latencies, positions, strict=True) if i in begins]
        client.close()
    finally:
        display.close()
        bench.stop()
    floor = statistics.median(direct_ms)
    return {
        "demo_gate_latency_p95_ms": max(0.0, _p95(gated_ms) - floor),
        "demo_gate_direct_p95_ms": _p95(direct_ms),
        # The whole path's p95 against the anchor's: how many times slower than injecting.
        "demo_gate_p95_vs_direct": _p95(gated_ms) / max(_p95(direct_ms), 1e-6),
        "demo_gate_frame_p95_ms": max(0.0, _p95(framed_ms) - floor),
        "demo_gate_inputs_measured": float(len(gated_ms)),
    }


def _plain(events: list[Any]) -> list[Any]:
    """The session's events without those of keys no plain X keymap has (a benchmark desktop
    has no program to type into: only the key's state is watched)."""
    from vm_pool.recording.reduce import Key

    return [e for e in events if not isinstance(e, Key) or e.keysym < 0x10000]


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


# --- replay fidelity -------------------------------------------------------------------------


def _fidelity(proxy: str) -> float:
    replayed = 0
    for seed in range(REPLAY_SESSIONS):
        steps = _record(proxy, seed)
        if steps is None:
            continue  # an input that began a step had no frame: it cannot replay
        fresh = _Session(f"replayed-{seed}")
        try:
            from annotation.episodes.replay_check import replay_steps

            verdict = replay_steps(fresh.control, EDITOR, steps)
        finally:
            fresh.stop()
        replayed += verdict["status"] == "replays"
    return replayed / REPLAY_SESSIONS


def _record(proxy: str, seed: int) -> list[Any] | None:
    """A corpus demonstration played through the gate in the editor's text, reduced to steps on
    the frames the gate grabbed, and a last one on the screen it left."""
    from annotation.episodes.replay_check import Recorded
    from tests.support.demo_corpus import IN_A_TEXT, session
    from vm_pool.models import RecordedInput
    from vm_pool.recording import rfb
    from vm_pool.recording.gate import end_recording, recorded_events
    from vm_pool.recording.reduce import Pointer, reduce_events
    from vm_pool.screen.screenshots import screenshot_png

    bench = _Session(f"replay-{seed}", EDITOR)
    try:
        geometry = bench.control.run(
            ["xdotool", "getactivewindow", "getwindowgeometry", "--shell"], timeout=10
        ).stdout
        g = {k: int(v) for k, v in (line.split("=", 1) for line in geometry.split())}
        # The text area: below the menu bar, inside the window's edges.
        region = (g["X"] + 30, g["Y"] + 70, g["X"] + g["WIDTH"] - 40, g["Y"] + g["HEIGHT"] - 40)
        demonstration = session(1000 + seed, region, IN_A_TEXT, actions=(3, 6))
        client = bench.client(proxy)
        time.sleep(0.5)
        last_at = 0.0
        for event in demonstration.events:
            time.sleep(max(0.0, min(1.0, event.at - last_at)))
            last_at = event.at
            if isinstance(event, Pointer):
                client.send(rfb.pointer_event(event.x, event.y, event.buttons))
            else:
                client.send(rfb.key_event(event.keysym, event.down))
        time.sleep(1.0)
        client.close()
        recording = end_recording(bench.recording.pk)
        final = bench.control.observe(settle=True).png
        ended_at = (recording.ended_at - recording.started_at).total_seconds()
        indexed = recorded_events(recording)
        frames = {
            row.index: row.frame
            for row in RecordedInput.objects.filter(
                recording=recording, frame__isnull=False
            ).select_related("frame")
        }
        steps: list[Any] = []
        starts: list[float] = []
        for number, step in enumerate(reduce_events([e for _, e in indexed]).steps, start=1):
            row, event = indexed[step.first_event]
            if row not in frames:
                return None
            pace = event.at - starts[-1] if starts else 0.0
            steps.append(Recorded(number, step.action.to_json(), screenshot_png(frames[row]), pace))
            starts.append(event.at)
        finished = {"type": "finished", "content": ""}
        pace = ended_at - starts[-1] if starts else 0.0
        return [*steps, Recorded(len(steps) + 1, finished, final, pace)]
    finally:
        bench.stop()
