"""The minimum settle, from the programs' own reaction times.

After an action a program starts drawing its reaction some time later: its first damage report.
A settle that answers "still" before a slow program has begun to draw observes the screen from
before the reaction; the live loop's watch then replaces the step's observation and the model is
asked again (a model call spent, a screen that flips under the annotator), and a rollout's quiet
period re-settles. ``min_ms`` (``TANDEM_SETTLE_MIN_MS``) is that wait for a reaction to begin:
once something was drawn, the settle ends ``window_ms`` after the last drawing without it
(``vm_pool.screen.settle``), so ``min_ms`` costs only the steps whose screen does not change.

Measured here on a real desktop (Xvfb and openbox) with real programs: each action's damage
reports for ``SPAN_S`` after it, each dated and a frame grabbed with it, once with the machine
idle and once with its cores kept busy by ``LOAD`` spinning processes. An action *reacted* when
the screen it ended on differs from the one before it as the watch judges
(``compare.meaningful_change``: a blinking caret is no difference). Each reaction is then replayed
under the settle's damage rule with the loop's ``window_ms`` for each candidate ``min_ms``: it is
settled *early* when the frame the rule would have answered with differs, as the watch judges,
from the screen the reaction ended on.

The desktop's processes share a cgroup of the unified hierarchy, as a local desktop's do, and
its work is read every ``ACTIVITY_SAMPLE_MS`` after each action (``vm_pool.sandbox.activity``:
CPU and waits for a core or the disk, the X server's aside). A run without a person stops
waiting for a first drawing once no sample of ``SAMPLE_MS`` held more than ``BUSY_US`` of work
for ``IDLE_MS``; each reaction is replayed under that rule for each candidate idle period: it is
*missed* when the rule would have ended the wait before the reaction's first drawing larger than
a caret.

Keys (the loaded run; ``_idle`` for the idle one): ``reaction_first_ms_p50``, ``_p95``, ``_max``:
from the action to the first drawing, over every action that reacted; and, loaded,
``settle_early_share_w<W>_min<M>``: the share of reactions settled early with ``window_ms`` W and
``min_ms`` M (a screen that does not change costs max(W, M) there); both runs,
``reaction_missed_share_idle<I>``: the share of reactions the activity rule with ``IDLE_MS`` I
would have missed; ``idle_found_ms_p50`` / ``_max``: when that rule, with the default
``IDLE_MS``, finds the desktop idle after an action, its reaction included (a reaction still at
work when the span ends counts as the span); and ``reaction_idle_gap_ms_max``: the longest the
desktop went without work between an action and its reaction's first drawing larger than a
caret, which ``IDLE_MS`` must exceed. A table per program, both runs, goes to stderr.
"""

import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPEATS = 15
SPAN_S = 1.2
REST_S = 0.3  # between actions: the previous reaction's tail is over
LOAD = 2  # spinning processes: the 2-core machine's cores kept busy
# (window_ms, min_ms) replayed: the loop's window with minimums from none to past the slowest
# start measured, and longer windows; a screen that does not change costs max(window, min).
RULES = ((50, 0), (50, 80), (50, 160), (50, 240), (50, 320), (100, 240), (150, 240))

IDLE_CANDIDATES_MS = (50, 100, 150, 250)
ACTIVITY_SAMPLE_MS = 5.0

GOALS = {"settle_early_share_w50_min240": "report", "reaction_missed_share_idle150": "0"}


@dataclass(frozen=True)
class Timeline:
    """What one action drew: when (ms after it was sent), and which of the screens it went
    through differ from the one it ended on, as the watch judges (``meaningful_change``)."""

    drawings: list[float]
    large: list[bool]  # each drawing at least MIN_EXTENT_PX wide and high (a caret's is not)
    stale: list[bool]  # [the screen before the first drawing, after each drawing]
    work: list[tuple[float, int]]  # (ms after the action, the desktop's work so far in µs)


def _spin() -> None:
    while True:
        pass


def settled_at(timeline: Timeline, window_ms: float, min_ms: float) -> tuple[float, int]:
    """When the settle's damage rule answers on this timeline, and how many of its drawings its
    frame shows: ``window_ms`` after the last drawing (the action counting as the first), and
    not before ``min_ms`` unless a drawing larger than a caret's came (``vm_pool.screen.settle``).
    """
    last, seen, reacted = 0.0, 0, False
    for at_ms, large in zip(timeline.drawings, timeline.large, strict=True):
        answer = last + window_ms if reacted else max(last + window_ms, min_ms)
        if at_ms > answer:
            return answer, seen
        last, seen, reacted = at_ms, seen + 1, reacted or large
    return (last + window_ms if reacted else max(last + window_ms, min_ms)), seen


def _idle_for(timeline: Timeline) -> Iterator[tuple[float, float]]:
    """The activity rule's samples after the action: (ms after it, ms since the last sample
    that found work), every ``SAMPLE_MS``, the action counting as work; a sample found work
    when the desktop's work grew by more than ``BUSY_US`` since the one before
    (``vm_pool.sandbox.activity``)."""
    from vm_pool.sandbox.activity import BUSY_US, SAMPLE_MS

    busy_at, last, index = 0.0, timeline.work[0][1], 0
    at = SAMPLE_MS
    while at <= SPAN_S * 1000:
        while index + 1 < len(timeline.work) and timeline.work[index + 1][0] <= at:
            index += 1
        work = timeline.work[index][1]
        if work - last > BUSY_US:
            busy_at = at
        last = work
        yield at, at - busy_at
        at += SAMPLE_MS


def idle_found_at(timeline: Timeline, idle_ms: float) -> float:
    """When the activity rule finds the desktop idle after the action (ms; infinity for never
    within the span): once no sample found work for ``idle_ms``."""
    return next((at for at, idle in _idle_for(timeline) if idle >= idle_ms), float("inf"))


def idle_gap_before_drawing(timeline: Timeline) -> float:
    """The longest the desktop went without work between the action and the reaction's first
    drawing larger than a caret (ms): the idle period a rule must exceed not to miss it."""
    first = next(
        (at for at, large in zip(timeline.drawings, timeline.large, strict=True) if large), 0.0
    )
    return max((idle for at, idle in _idle_for(timeline) if at <= first), default=0.0)


def _missed(timeline: Timeline, idle_ms: float) -> bool:
    """Would the activity rule have ended the wait before the reaction's first drawing larger
    than a caret?"""
    firsts = [at for at, large in zip(timeline.drawings, timeline.large, strict=True) if large]
    return bool(firsts) and idle_found_at(timeline, idle_ms) < firsts[0]


def _timeline(control: Any, reports: Any, activity: Any, action: dict[str, Any]) -> Timeline:
    from vm_pool.actions import Action
    from vm_pool.screen.compare import MIN_EXTENT_PX, meaningful_change

    time.sleep(REST_S)
    reports.read(sync=True)
    reports.take_box()
    seen = reports.changed_at
    frames = [control.grab_frame()]
    control.execute(Action.from_json(action))
    sent = time.monotonic()
    work = [(0.0, activity.work_us())]
    drawings, large = [], []
    while (left := SPAN_S - (time.monotonic() - sent)) > 0:
        at = reports.wait(min(left, ACTIVITY_SAMPLE_MS / 1000))
        work.append(((time.monotonic() - sent) * 1000, activity.work_us()))
        box = reports.take_box()
        if at > seen and box is not None:
            drawings.append((at - sent) * 1000)
            large.append(min(box.width, box.height) >= MIN_EXTENT_PX)
            frames.append(control.grab_frame())
            seen = at
    last = frames[-1]
    stale = [meaningful_change(frame, last) for frame in frames]
    return Timeline(drawings, large, stale, work)


def _record(repeats: int) -> dict[str, list[Timeline]]:
    """Each program's actions on a fresh desktop, ``repeats`` times each."""
    from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS
    from tests.support.desktops import running_desktop
    from vm_pool.actions import Action
    from vm_pool.sandbox.activity import DesktopActivity
    from vm_pool.sandbox.limits import accounting_root, in_cgroups, remove_cgroup
    from vm_pool.screen.damage import DamageReports
    from vm_pool.x11.controller import X11Controller

    cases: dict[str, list[Timeline]] = {}
    base = accounting_root()
    if base is None:
        raise RuntimeError("this host has no unified cgroup hierarchy to account desktops in")
    cgroup = base / "tandem" / "reaction-bench"
    cgroup.parent.mkdir(exist_ok=True)
    remove_cgroup(cgroup)
    cgroup.mkdir()
    procs = cgroup / "cgroup.procs"

    def launch(*argv: str) -> Any:  # in the desktop's cgroup, as a local desktop's programs
        return desktop.launch(*in_cgroups([procs], list(argv)))

    def act(name: str, action: dict[str, Any]) -> None:
        cases.setdefault(name, []).append(_timeline(control, reports, activity, action))

    def click(window: Any) -> None:  # gives it the focus
        center = window.center
        control.execute(Action.from_json({"type": "click", "point": [center.x, center.y]}))

    def key(*keys: str) -> dict[str, Any]:
        return {"type": "hotkey", "keys": list(keys)}

    with tempfile.TemporaryDirectory() as home, running_desktop(1280, 800, Path(home)) as desktop:
        for process in desktop.processes:  # its X server and window manager
            procs.write_text(str(process.pid))
        activity = DesktopActivity.of(cgroup)
        assert activity is not None, f"{cgroup} has no CPU and pressure accounting"
        control = X11Controller(desktop.display)
        reports = DamageReports(desktop.display)
        try:
            launch("xterm", "-geometry", "80x24+10+10")
            window = desktop.wait_for_window("xterm")
            click(window)
            for _ in range(repeats):
                act("xterm: type a letter", {"type": "type", "content": "a"})
            launch("mousepad")
            desktop.wait_for_window("mousepad")
            for _ in range(repeats):
                act("mousepad: open the File menu", key("alt", "f"))
                act("mousepad: close the menu", key("Escape"))
            for _ in range(repeats):
                act("mousepad: open Save As", key("ctrl", "shift", "s"))
                act("mousepad: close Save As", key("Escape"))
            for _ in range(repeats):
                message = launch("xmessage", "-default", "okay", "-center", "A message")
                window = desktop.wait_for_window("xmessage")
                click(window)
                act("xmessage: Enter closes it", key("Return"))
                message.wait(5)
            profile = f"--user-data-dir={home}/chromium"
            launch(CHROMIUM, *CHROMIUM_ARGS, profile, "about:blank")
            desktop.wait_for_window("Chromium", timeout=60)
            time.sleep(2)  # its first paint's tail
            control.execute(Action.from_json(key("ctrl", "l")))
            for _ in range(repeats):
                act("chromium: type in the address bar", {"type": "type", "content": "a"})
            for _ in range(repeats):
                act("chromium: new tab", key("ctrl", "t"))
                act("chromium: close the tab", key("ctrl", "w"))
                act("chromium: open its menu", key("alt", "f"))
                act("chromium: close the menu", key("Escape"))
        finally:
            reports.close()
            control.close()
    remove_cgroup(cgroup)
    return cases


def _figures(cases: dict[str, list[Timeline]], suffix: str) -> dict[str, float]:
    reactive = [t for timelines in cases.values() for t in timelines if t.stale[0]]
    firsts = sorted(t.drawings[0] for t in reactive)
    figures = {
        f"reaction_first_ms_p50{suffix}": round(statistics.median(firsts), 1),
        f"reaction_first_ms_p95{suffix}": round(firsts[int(0.95 * (len(firsts) - 1))], 1),
        f"reaction_first_ms_max{suffix}": round(firsts[-1], 1),
    }
    print(f"\nreaction{suffix or ' (loaded)'}: first drawing (ms); reactions settled early, "
          "per window_ms/min_ms", file=sys.stderr)  # fmt: skip
    header = "".join(f" {w:>3}/{m:<3}" for w, m in RULES)
    print(f"{'action':36} {'p50':>6} {'max':>6} {'n':>3}{header}", file=sys.stderr)
    for name, timelines in cases.items():
        drew = [t for t in timelines if t.stale[0]]
        firsts_here = [t.drawings[0] for t in drew] or [0.0]
        cells = "".join(f" {sum(_early(t, w, m) for t in drew):>7}" for w, m in RULES)
        print(f"{name:36} {statistics.median(firsts_here):6.1f} {max(firsts_here):6.1f}"
              f" {len(drew):>3}{cells}", file=sys.stderr)  # fmt: skip
    from vm_pool.sandbox.activity import IDLE_MS

    print(f"{'action':36} {'idle found p50':>14} {'max':>6}  missed per IDLE_MS "
          f"{IDLE_CANDIDATES_MS}", file=sys.stderr)  # fmt: skip
    every = [t for timelines in cases.values() for t in timelines]
    for name, timelines in cases.items():
        found = [min(idle_found_at(t, IDLE_MS), SPAN_S * 1000) for t in timelines]
        drew = [t for t in timelines if t.stale[0]]
        missed = " ".join(f"{sum(_missed(t, i) for t in drew):>3}" for i in IDLE_CANDIDATES_MS)
        print(f"{name:36} {statistics.median(found):14.1f} {max(found):6.1f}  {missed}",
              file=sys.stderr)  # fmt: skip
    gaps = [idle_gap_before_drawing(t) for t in reactive]
    figures[f"reaction_idle_gap_ms_max{suffix}"] = round(max(gaps), 1)
    found = sorted(min(idle_found_at(t, IDLE_MS), SPAN_S * 1000) for t in every)
    figures[f"idle_found_ms_p50{suffix}"] = round(statistics.median(found), 1)
    figures[f"idle_found_ms_max{suffix}"] = round(found[-1], 1)
    for idle_ms in IDLE_CANDIDATES_MS:
        missed_share = sum(_missed(t, idle_ms) for t in reactive) / len(reactive)
        figures[f"reaction_missed_share_idle{idle_ms}{suffix}"] = round(missed_share, 3)
    if not suffix:
        for window_ms, min_ms in RULES:
            early = sum(_early(t, window_ms, min_ms) for t in reactive) / len(reactive)
            figures[f"settle_early_share_w{window_ms}_min{min_ms}"] = round(early, 3)
    return figures


def _early(timeline: Timeline, window_ms: float, min_ms: float) -> bool:
    """Would the settle's frame differ from the screen the reaction ended on?"""
    return timeline.stale[settled_at(timeline, window_ms, min_ms)[1]]


def run(repeats: int = REPEATS) -> dict[str, float]:
    figures = _figures(_record(repeats), "_idle")
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(LOAD)]
    for spinner in spinners:
        spinner.start()
    try:
        loaded = _record(repeats)
    finally:
        for spinner in spinners:
            spinner.terminate()
    return {**_figures(loaded, ""), **figures}
