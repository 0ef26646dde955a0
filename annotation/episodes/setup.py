"""Setting a desktop up for an episode, for both of its drivers (a person's loop, a rollout's
run): the task's setup run on the episode's desktop, the first screen after it, and the setup's
log (the failures it went on after) kept with the episode, so a reviewer knows how it started.
"""

from dataclasses import dataclass
from typing import Any

from annotation.models import Episode
from vm_pool import pool
from vm_pool.desktop import Observation
from vm_pool.setup.runner import SetupFailed, run_setup

# What a setup that could not be run raises: the episode then ends ``env_failed``, saying why.
SETUP_ERRORS = (SetupFailed, pool.DesktopError)


@dataclass(frozen=True)
class SetUp:
    control: Any  # the desktop's control (a provider's)
    observation: Observation  # the screen after the setup, settled
    log: list[str]  # the failures the setup went on after (a command's exit code, a window)


def set_up(episode: Episode) -> SetUp:
    """Run the task's setup on the episode's desktop and observe the screen after it; raises one
    of ``SETUP_ERRORS``."""
    assert episode.desktop is not None
    control = pool.control_for(episode.desktop)
    log = run_setup(control, episode.task.setup)
    return SetUp(control, control.observe(settle=True), log)


def keep_setup_log(episode: Episode, done: SetUp) -> None:
    if done.log:
        Episode.objects.filter(pk=episode.pk).update(setup_log=done.log)
