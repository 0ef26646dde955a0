"""The warm pool on real local desktops: leasing, resets, health, recovery, setup."""

import os
import signal
import time

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from backend.notifications import user_group
from tests.support.desktops import sandbox_xvfb
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
from vm_pool.providers.local import desktop_dir
from vm_pool.providers.registry import get_provider
from vm_pool.setup.runner import SetupFailed, run_setup

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def template(tmp_path) -> DesktopTemplate:
    home = tmp_path / "home-template"
    home.mkdir()
    (home / "notes.txt").write_text("template notes\n")
    return DesktopTemplate.objects.create(
        name="office", width=1280, height=800, min_ready=1, max_desktops=3, home_template=str(home)
    )


@pytest.fixture
def desktops():
    """Stops every desktop the test started, whatever happened."""
    yield
    for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
        pool.stop_desktop(desktop.pk)


def ready_desktop(template: DesktopTemplate) -> Desktop:
    desktop = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    return desktop


def control_of(desktop: Desktop):
    desktop.refresh_from_db()
    return get_provider("local").control(pool.spec_for(desktop), pool.endpoint_of(desktop))


def test_displays_are_allocated_from_the_database_without_collisions(template, desktops):
    created = [pool.create_desktop(template, settings.TANDEM_HOST) for _ in range(3)]
    displays = [d.display for d in created]
    assert len(set(displays)) == 3
    assert all(
        settings.TANDEM_DISPLAY_RANGE[0] <= d <= settings.TANDEM_DISPLAY_RANGE[1] for d in displays
    )
    # Local desktops listen on no TCP port: VNC and the agent are unix sockets.
    assert all(d.vnc_port is None for d in created)
    pool.stop_desktop(created[0].pk)
    # A stopped desktop's display is free again.
    assert pool.create_desktop(template, settings.TANDEM_HOST).display == displays[0]


def test_lease_takes_a_ready_desktop_and_never_the_same_one_twice(template, desktops, make_user):
    ann, other = make_user("ann"), make_user("otto")
    first = ready_desktop(template)
    leased = pool.lease_desktop(template, ann, "task:1", 60)
    assert leased.pk == first.pk and leased.leased_by == ann
    with pytest.raises(pool.NoDesktopAvailable):
        pool.lease_desktop(template, other, "task:2", 60)
    assert Desktop.objects.get(pk=first.pk).leased_by == ann


def test_release_resets_home_and_rotates_secrets(template, desktops, make_user):
    desktop = ready_desktop(template)
    home = desktop_dir(desktop.pk) / "home"
    assert (home / "notes.txt").read_text() == "template notes\n"
    control = control_of(desktop)
    control.put_file("scratch.txt", b"left behind")
    control.put_file("notes.txt", b"changed")
    old_key, old_group = desktop.agent_key, desktop.instance_id

    pool.lease_desktop(template, make_user("ann"), "task:1", 60)
    assert pool.release_desktop(desktop.pk)
    desktop.refresh_from_db()
    assert desktop.status == DesktopStatus.RESETTING and desktop.generation == 1
    desktop = pool.reset_desktop(desktop.pk)

    assert desktop.status == DesktopStatus.READY
    assert not (home / "scratch.txt").exists()
    assert (home / "notes.txt").read_text() == "template notes\n"
    assert desktop.agent_key != old_key and desktop.instance_id != old_group
    assert get_provider("local").health(pool.spec_for(desktop)).ok


def test_killed_xvfb_is_found_broken_then_replaced(template, desktops, make_user):
    desktop = ready_desktop(template)
    holder = make_user("ann")
    pool.lease_desktop(template, holder, "task:1", 60)
    xvfb = sandbox_xvfb(desktop.display)
    assert len(xvfb) == 1
    os.kill(xvfb[0], signal.SIGKILL)
    time.sleep(0.3)

    layer = get_channel_layer()
    inbox = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(holder.pk), inbox)

    assert pool.check_health(settings.TANDEM_HOST) == [desktop.pk]
    notice = async_to_sync(layer.receive)(inbox)  # what the holder's open sockets receive
    assert notice["event"] == "desktop_failed" and notice["payload"]["desktop"] == desktop.pk
    desktop.refresh_from_db()
    assert desktop.status == DesktopStatus.BROKEN
    assert "xvfb" in desktop.broken_reason  # the holder is told what failed
    pool.register_host(settings.TANDEM_HOST, ["local"])
    done = pool.maintain_host(settings.TANDEM_HOST)

    assert done["stopped"] == 1 and done["started"] == 1
    assert Desktop.objects.get(pk=desktop.pk).status == DesktopStatus.STOPPED
    replacement = Desktop.objects.get(status=DesktopStatus.READY)
    assert replacement.pk != desktop.pk
    assert pool.lease_desktop(template, make_user("otto"), "task:2", 60).pk == replacement.pk
    with pytest.raises(pool.NoDesktopAvailable):  # the broken one is never leased again
        pool.lease_desktop(template, make_user("olga"), "task:3", 60)


def test_a_reset_abandoned_by_a_dead_worker_is_never_leased_and_is_redone(
    template, desktops, make_user
):
    desktop = ready_desktop(template)
    pool.lease_desktop(template, make_user("ann"), "task:1", 60)
    pool.release_desktop(desktop.pk)  # the reset job is "lost": its worker died
    with pytest.raises(pool.NoDesktopAvailable):
        pool.lease_desktop(template, make_user("otto"), "task:2", 60)

    assert pool.recover_host(settings.TANDEM_HOST) == 1
    assert Desktop.objects.get(pk=desktop.pk).status == DesktopStatus.READY
    assert pool.lease_desktop(template, make_user("olga"), "task:3", 60).pk == desktop.pk


def test_setup_runs_launch_file_and_command_steps(template, desktops):
    desktop = ready_desktop(template)
    control = control_of(desktop)
    setup = [
        {"type": "file", "parameters": {"path": "docs/plan.txt", "content": "step one\n"}},
        {
            "type": "execute",
            "parameters": {"command": "cp docs/plan.txt docs/copy.txt", "shell": True},
        },
        {"type": "launch", "parameters": {"command": ["xterm", "-title", "setup-term"]}},
    ]
    empty = control.observe(settle=True).png
    assert run_setup(control, setup) == []  # nothing failed on the way
    home = desktop_dir(desktop.pk) / "home"
    assert (home / "docs/copy.txt").read_text() == "step one\n"
    # The launch step returns once the window is mapped: no sleep, and the first observation
    # shows the program, not the empty desktop it started on.
    windows = control.run(["xdotool", "search", "--onlyvisible", "--name", "setup-term"], 10)
    assert windows.returncode == 0 and windows.output.strip()
    assert control.observe(settle=True).png != empty


def test_a_launched_program_without_a_window_ends_the_wait_at_its_timeout(template, desktops):
    control = control_of(ready_desktop(template))
    quiet = control.launch(["sleep", "30"], window_timeout=1)
    assert quiet.window is False  # and it is still running, in the desktop's own PID namespace:
    assert control.run(["kill", "-0", str(quiet.pid)], 5).returncode == 0
    shown = control.launch(["xterm", "-title", "second-term"], window_timeout=10)
    assert shown.window is True
    run_setup(  # a setup step whose program shows no window is not a failure
        control,
        [{"type": "launch", "parameters": {"command": ["sleep", "30"], "window_timeout": 1}}],
    )
    with pytest.raises(SetupFailed, match=r"setup step 1 \(launch\): 'window_timeout' must be"):
        run_setup(
            control,
            [{"type": "launch", "parameters": {"command": ["xterm"], "window_timeout": "soon"}}],
        )


def test_unsupported_or_failing_setup_steps_are_named(template, desktops):
    control = control_of(ready_desktop(template))
    with pytest.raises(SetupFailed, match=r"setup step 2 \(googledrive\) is not supported"):
        run_setup(
            control, [{"type": "sleep", "parameters": {"seconds": 0}}, {"type": "googledrive"}]
        )
    # As in OSWorld, a command that fails is logged, and the setup goes on.
    log = run_setup(
        control, [{"type": "execute", "parameters": {"command": "exit 3", "shell": True}}]
    )
    assert log == ["setup step 1 (execute): exited with 3: "]


def test_setup_opens_a_url_in_the_desktops_browser(template, desktops):
    control = control_of(ready_desktop(template))
    page = "<title>Tandem setup page</title><h1>Hello</h1>"
    run_setup(  # the page is a file of the desktop: the browser runs in its sandbox
        control,
        [
            {"type": "file", "parameters": {"path": "~/welcome.html", "content": page}},
            {
                "type": "chrome_open_tabs",
                "parameters": {"urls_to_open": ["file:///home/user/welcome.html"]},
            },
        ],
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = control.run(["xdotool", "search", "--name", "Tandem setup page"], timeout=10)
        if found.returncode == 0 and found.output.strip():
            break
        time.sleep(0.5)
    assert found.returncode == 0 and found.output.strip(), "the browser window did not open"
