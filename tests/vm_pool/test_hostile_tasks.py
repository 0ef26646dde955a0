"""Task files written by others: their setup runs inside the desktop's sandbox, and what it may
not do ends the episode with a setup error that names the rule, writing nothing.

A manager imports the task over the API; an annotator starts its episode; the setup job runs
in this process on a real sandboxed desktop (``prepare_episode``, as the host's worker runs it).
"""

import re
from pathlib import Path

import pytest

from annotation.episodes import loop
from annotation.models import Episode, EpisodeOutcome, Project
from backend.accounts.roles import Role
from vm_pool import pool
from vm_pool.desktop import DesktopControl
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
from vm_pool.providers.local import desktop_dir
from vm_pool.providers.registry import get_provider
from vm_pool.setup.runner import SetupFailed, run_setup

PROBE = (
    "id > ~/id.txt; tr '\\0' '\\n' < /proc/1/environ > ~/environ.txt; "
    "(echo taken > /etc/tandem-taken) 2> ~/etc-error.txt; true"
)


@pytest.fixture
def desktop(loop_settings, project) -> Desktop:
    template = DesktopTemplate.objects.create(name="hostile", min_ready=0)
    Project.objects.filter(pk=project.pk).update(environment_template="hostile")
    started = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    assert started.status == DesktopStatus.READY, started.broken_reason
    return started


def control_of(desktop: Desktop) -> DesktopControl:
    desktop.refresh_from_db()
    return get_provider("local").control(pool.spec_for(desktop), pool.endpoint_of(desktop))


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("file:///etc/shadow", "only http and https URLs are fetched"),
        ("http://127.0.0.1:5432/", "127.0.0.1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a metadata address"),
    ],
)
def test_a_managers_task_runs_unprivileged_and_its_forbidden_download_ends_the_episode(
    desktop, project, make_user, client_for, url, rule
):
    manager = make_user("mia", project, Role.MANAGER)
    annotator = make_user("ann", project, Role.ANNOTATOR)
    task = {
        "id": "hostile-1",
        "instruction": "Look around",
        "config": [
            {"type": "execute", "parameters": {"command": PROBE, "shell": True}},
            {"type": "download", "parameters": {"files": [{"url": url, "path": "~/loot.txt"}]}},
        ],
    }
    imported = client_for(manager).post(
        f"/api/projects/{project.pk}/import/", [task], format="json"
    )
    assert imported.status_code in (200, 201), imported.json()

    episode = loop.start_episode(annotator, Project.objects.filter(pk=project.pk))
    loop.prepare_episode(episode.pk)

    episode = Episode.objects.get(pk=episode.pk)
    assert episode.outcome == EpisodeOutcome.ENV_FAILED
    assert "setup step 2 (download)" in episode.end_reason and rule in episode.end_reason
    assert not episode.steps.exists()  # no observation was taken of a half-prepared desktop
    home = desktop_dir(desktop.pk) / "home"
    # The commands ran, as the desktop's unprivileged user, in the sandbox:
    assert (home / "id.txt").read_text().startswith("uid=1000(user) gid=1000(user)")
    # PID 1 inside is bubblewrap itself: even its environment is made from nothing.
    assert (home / "environ.txt").read_text().split() == [
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "PWD=/",
    ]
    assert "Read-only file system" in (home / "etc-error.txt").read_text()
    assert not Path("/etc/tandem-taken").exists()
    assert not (home / "loot.txt").exists()  # and the download put nothing in HOME


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside.txt", "'..' is not allowed"),
        ("~/../../etc/passwd", "'..' is not allowed"),
        ("/etc/profile.d/tandem.sh", "outside the desktop user's HOME (/home/user) and /tmp"),
        ("/home/user2/notes.txt", "outside the desktop user's HOME"),
        ("/tmp2/x", "outside the desktop user's HOME"),
    ],
)
def test_file_paths_that_leave_home_are_refused_before_any_step_runs(desktop, path, reason):
    control = control_of(desktop)
    setup = [
        {"type": "execute", "parameters": {"command": "touch ~/first-step-ran", "shell": True}},
        {"type": "file", "parameters": {"path": path, "content": "x"}},
    ]
    with pytest.raises(SetupFailed, match=r"setup step 2 \(file\): .*" + re.escape(reason)):
        run_setup(control, setup)
    assert not (desktop_dir(desktop.pk) / "home" / "first-step-ran").exists()


def test_a_symlink_that_leaves_home_is_refused_where_the_file_is_written(desktop):
    control = control_of(desktop)
    link = {"type": "execute", "parameters": {"command": "ln -s /etc ~/config-link", "shell": True}}
    with pytest.raises(SetupFailed, match=r"setup step 2 \(file\) failed: .*is outside HOME"):
        run_setup(
            control,
            [link, {"type": "file", "parameters": {"path": "~/config-link/x", "content": "x"}}],
        )
    with pytest.raises(SetupFailed, match="is a symlink"):
        run_setup(
            control,
            [
                {
                    "type": "execute",
                    "parameters": {"command": "ln -s /etc/hosts ~/h", "shell": True},
                },
                {"type": "file", "parameters": {"path": "~/h", "content": "x"}},
            ],
        )
    # A link that stays inside HOME is followed as usual, and the agent still answers.
    run_setup(
        control,
        [
            {
                "type": "execute",
                "parameters": {"command": "mkdir -p ~/d && ln -s ~/d ~/in", "shell": True},
            },
            {"type": "file", "parameters": {"path": "~/in/kept.txt", "content": "kept"}},
        ],
    )
    assert (desktop_dir(desktop.pk) / "home" / "d" / "kept.txt").read_text() == "kept"


def test_an_unknown_setup_type_is_refused_naming_it(desktop):
    with pytest.raises(SetupFailed, match=r"setup step 1 \(run_as_root\) is not supported"):
        run_setup(control_of(desktop), [{"type": "run_as_root", "parameters": {}}])
