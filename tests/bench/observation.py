"""How often a stored observation is not the screen the annotator decides on.

A desktop program opens or closes a dialog 300–1500 ms after each key press
(``tests/support/slow_dialog.py``). The loop's jobs run in this process on a real sandboxed desktop,
with the screen watch; each step is decided 2 s after its observation, and the screen then
(the one the annotator sees) is compared with the step's stored observation.

``observation_stale_rate``: share of steps whose stored observation differed from that screen
(goal 0). ``observation_stale_rate_settle_only``: share of steps whose first, settled
observation was replaced by the watch, i.e. would have been stale with settle detection alone,
measured in the same run as the anchor. ``observation_reobserve_ms_p50``: how long the watch
waited for the replaced screen to settle, median.
"""

import io
import statistics
import tempfile
import time
import uuid
from pathlib import Path

STEPS = 30
LOOK_S = 2.0
DISPLAYS = (2440, 2449)
KEY = {"type": "hotkey", "keys": ["space"]}
SLOW_DIALOG = Path(__file__).resolve().parent.parent / "support" / "slow_dialog.py"

GOALS = {"observation_stale_rate": "0"}


def _rgb(png: bytes) -> bytes:
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB").tobytes()


def run() -> dict[str, float | int]:
    from tests.bench import fresh_database, setup_django

    setup_django()
    from django.core.files.storage import default_storage
    from django.test import override_settings

    from annotation.episodes import loop as episodes
    from annotation.models import Decision, Episode, Membership, Project, Step, Task
    from backend.accounts.models import User
    from backend.accounts.roles import Role
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
    from vm_pool.screen import watch as screen_watch

    host = f"bench-watch-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory(prefix="tandem-bench-watch-") as tmp:
        Path(tmp).chmod(0o711)  # each desktop's user reaches its own directory through it
        local = override_settings(
            TANDEM_DISPLAY_RANGE=DISPLAYS,
            TANDEM_DESKTOP_ROOT=Path(tmp) / "desktops",
            MEDIA_ROOT=Path(tmp) / "media",
            TANDEM_HOST=host,
            CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
        )
        with local, fresh_database():
            template = DesktopTemplate.objects.create(name="watch", width=1280, height=800)
            project = Project.objects.create(name="Watch bench", environment_template="watch")
            user = User.objects.create_user("bench-annotator")
            Membership.objects.create(project=project, user=user, role=Role.ANNOTATOR)
            Task.objects.create(
                project=project,
                external_id="slow-dialog",
                instruction="Open and close the dialog",
                max_steps=STEPS + 5,
                setup=[
                    {"type": "file", "parameters": {"path": "~/slow_dialog.py",
                                                    "content": SLOW_DIALOG.read_text()}},
                    {"type": "launch", "parameters": {"command": ["python3", "slow_dialog.py"]}},
                ],
            )  # fmt: skip
            try:
                desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
                if desktop.status != DesktopStatus.READY:
                    raise RuntimeError(f"the desktop did not start: {desktop.broken_reason}")
                episode = episodes.start_episode(user, Project.objects.filter(pk=project.pk))
                episodes.prepare_episode(episode.pk)
                episode = Episode.objects.get(pk=episode.pk)
                if episode.ended_at is not None:
                    raise RuntimeError(f"the episode did not start: {episode.end_reason}")
                control = pool.control_for(episode.desktop)
                stale = replaced = 0
                waits = []
                for index in range(1, STEPS + 1):
                    step = Step.objects.get(episode=episode, index=index)
                    time.sleep(LOOK_S)
                    seen = control.observe(settle=False).png
                    step.refresh_from_db()
                    with default_storage.open(step.observation.file.name, "rb") as file:
                        stale += _rgb(file.read()) != _rgb(seen)
                    if step.reobserved:
                        replaced += 1
                        waits.append(step.settle_ms or 0)
                    episodes.decide(
                        episode.pk, user, index, Decision.CORRECTED, thought="Toggle it.",
                        action=KEY, observation=step.observation_id,
                    )  # fmt: skip
                    episodes.execute_step(step.pk)
            finally:
                for key in screen_watch.watcher.watching():
                    screen_watch.watcher.stop(key)
                for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
                    pool.stop_desktop(desktop.pk)
    return {
        "observation_stale_rate": round(stale / STEPS, 3),
        "observation_stale_rate_settle_only": round(replaced / STEPS, 3),
        "observation_reobserve_ms_p50": round(statistics.median(waits), 1) if waits else 0.0,
    }
