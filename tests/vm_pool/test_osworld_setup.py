"""OSWorld's setup steps and getters on a real sandboxed desktop, with OSWorld's meaning.

Windows are raised and closed through the window manager; the browser's tabs are opened,
listed and closed over its debugging port, which only the desktop's agent reaches; commands get
OSWorld's placeholders and ``~/`` paths, and their failures are logged while the setup goes on;
a program that does not exist fails the setup with the reason, at once.
"""

import io
import socket
import time

import pytest
from PIL import Image

from vm_pool.desktop import DesktopControl
from vm_pool.evaluation.getters import Reading
from vm_pool.evaluation.getters.browser import active_url_from_accessTree, open_tabs_info
from vm_pool.evaluation.getters.files import vm_command_line, vm_file, vm_wallpaper
from vm_pool.setup.runner import SetupFailed, run_setup

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def control(sandboxed_control) -> DesktopControl:
    return sandboxed_control


def active_title(control: DesktopControl) -> str:
    return control.run(["xdotool", "getactivewindow", "getwindowname"], timeout=10).stdout.strip()


def titles(control: DesktopControl) -> str:
    return control.run(["wmctrl", "-l"], timeout=10).stdout


def becomes(read, expected, timeout: float = 10) -> bool:
    """Whether ``read()`` gives ``expected`` within ``timeout``: the window manager acts on a
    request when it gets to it, later on a busy machine."""
    deadline = time.monotonic() + timeout
    while read() != expected:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def xterm(title: str) -> dict:
    return {"type": "launch", "parameters": {"command": ["xterm", "-title", title]}}


def step(kind: str, **parameters) -> dict:
    return {"type": kind, "parameters": parameters}


def test_windows_are_activated_and_closed_by_name_and_a_missing_one_is_logged(control):
    log = run_setup(control, [xterm("Alpha notes"), xterm("Beta notes")])
    assert log == [] and becomes(lambda: active_title(control), "Beta notes")

    log = run_setup(control, [step("activate_window", window_name="Alpha notes", strict=True)])
    assert log == [] and becomes(lambda: active_title(control), "Alpha notes")
    # Not strict: part of the title, in any case, as wmctrl matches it.
    run_setup(control, [step("activate_window", window_name="beta")])
    assert becomes(lambda: active_title(control), "Beta notes")

    log = run_setup(control, [step("close_window", window_name="Beta notes", strict=True)])
    assert log == [] and becomes(lambda: "Beta notes" in titles(control), False)
    assert "Alpha notes" in titles(control)
    log = run_setup(control, [step("activate_window", window_name="Gamma", strict=True)])
    assert log == ["setup step 1 (activate_window): no window 'Gamma' (wmctrl exited with 1)"]


def test_commands_get_osworlds_placeholders_and_home_and_go_on_after_failing(control):
    log = run_setup(
        control,
        [
            step("execute", command="echo {SCREEN_WIDTH}x{SCREEN_HEIGHT} > ~/size.txt", shell=True),
            step("execute", command=["cp", "~/size.txt", "~/half-{SCREEN_WIDTH_HALF}.txt"]),
            step("execute", command="echo nope >&2; exit 4", shell=True),
            step("command", command=["touch", "~/after-the-failure"]),
        ],
    )
    assert log == ["setup step 3 (execute): exited with 4: nope"]
    assert control.read_file("~/size.txt") == b"1024x768\n"
    assert control.read_file("/home/user/half-512.txt") == b"1024x768\n"
    assert control.read_file("~/after-the-failure") == b""
    assert control.read_file("~/never-written") is None


def test_execute_until_repeats_the_command_until_its_output_says_so(control):
    counter = "n=$(cat ~/n 2>/dev/null || echo 0); echo $((n+1)) > ~/n; cat ~/n"
    run_setup(control, [step("execute", command=counter, shell=True, until={"stdout": "3"})])
    assert control.read_file("~/n") == b"3\n"


def test_a_program_that_does_not_exist_fails_the_setup_at_once(control):
    started = time.monotonic()
    with pytest.raises(SetupFailed, match=r"setup step 1 \(launch\) failed: .*no-such-program"):
        run_setup(control, [step("launch", command=["no-such-program", "--flag"])])
    with pytest.raises(SetupFailed, match=r"exited with 127 before showing a window"):
        run_setup(control, [step("launch", command="no-such-program", shell=True)])
    assert time.monotonic() - started < 8  # not the 10 s wait for a window that never comes
    # A program that runs and ends with an error is OSWorld's "started": logged, and on.
    log = run_setup(control, [step("launch", command=["pkill", "no-such-process"])])
    assert log == ["setup step 1 (launch): pkill exited with 1"]


def test_execute_with_verification_waits_for_its_window_or_fails(control):
    run_setup(
        control,
        [
            step(
                "execute_with_verification",
                command="xterm -title Verified &",
                shell=True,
                verification={"window_exists": "Verified"},
                max_wait_time=15,
            )
        ],
    )
    assert "Verified" in titles(control)
    with pytest.raises(SetupFailed, match=r"did not hold within 2s"):
        run_setup(
            control,
            [
                step(
                    "execute_with_verification",
                    command=["true"],
                    verification={"command_success": "test -f ~/never"},
                    max_wait_time=2,
                )
            ],
        )


def test_browser_tabs_open_and_close_over_the_debugging_port_only_the_agent_reaches(
    control, tmp_path
):
    pages = [
        step("file", path=f"~/page{i}.html", content=f"<title>Page {i}</title><p>Number {i}</p>")
        for i in (1, 2)
    ]
    run_setup(
        control,
        [*pages, step("chrome_open_tabs", urls_to_open=["file:///home/user/page1.html"])],
    )
    # The browser is running now: the next tab opens in it, over DevTools.
    run_setup(control, [step("chrome_open_tabs", urls_to_open=["file:///home/user/page2.html"])])
    reading = Reading(control, tmp_path, fetch_url=lambda url: b"")
    tabs = open_tabs_info(reading, {})["value"]  # gathered as a value: nothing to parse
    assert {t["url"] for t in tabs} == {
        "file:///home/user/page1.html",
        "file:///home/user/page2.html",
    }
    # OSWorld reads the address bar, where a file URL shows whole, scheme and all.
    active = active_url_from_accessTree(reading, {"goto_prefix": ""})
    assert active == {"kind": "value", "value": "file:///home/user/page2.html"}

    run_setup(control, [step("chrome_close_tabs", urls_to_close=["file:///home/user/page2.html"])])
    tabs = open_tabs_info(reading, {})["value"]
    assert [t["url"] for t in tabs] == ["file:///home/user/page1.html"]
    # The port is the desktop's own: the host cannot reach it.
    with socket.socket() as probe:
        probe.settimeout(1)
        assert probe.connect_ex(("127.0.0.1", 9222)) != 0


def test_getters_read_files_and_command_output_through_the_agent(control, tmp_path):
    run_setup(control, [step("file", path="~/Documents/report.txt", content="ready\n")])
    reading = Reading(control, tmp_path, fetch_url=lambda url: b"")
    # Gathered into the evaluation's folder, not opened: the jail reads them.
    found = vm_file(reading, {"path": "/home/user/Documents/report.txt", "dest": "report.txt"})
    assert found == {"kind": "files", "files": ["report.txt"], "single": True}
    assert (tmp_path / "report.txt").read_text() == "ready\n"
    missing = vm_file(reading, {"path": "~/missing.txt", "dest": "missing.txt"})
    assert missing == {"kind": "files", "files": [None], "single": True}
    output = vm_command_line(reading, {"command": "cat ~/Documents/report.txt", "shell": True})
    assert output == {"kind": "value", "value": "ready\n"}
    with pytest.raises(Exception, match="outside HOME"):
        vm_file(reading, {"path": "/etc/passwd", "dest": "passwd"})


def no_fetch(url: str) -> bytes:
    raise AssertionError(f"nothing is fetched here, not {url}")


def test_the_wallpaper_is_the_image_the_step_names(control, tmp_path):
    red = io.BytesIO()
    Image.new("RGB", (320, 200), (200, 30, 30)).save(red, "PNG")
    control.put_file("~/Pictures/red.png", red.getvalue())
    run_setup(control, [step("change_wallpaper", path="~/Pictures/red.png")])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        screen = Image.open(io.BytesIO(control.observe(settle=True).png)).convert("RGB")
        if screen.getpixel((700, 500)) == (200, 30, 30):
            break
        time.sleep(0.5)
    assert screen.getpixel((700, 500)) == (200, 30, 30)  # stretched over the whole screen
    got = vm_wallpaper(Reading(control, tmp_path, fetch_url=no_fetch), {"dest": "w.png"})
    assert got["files"] == ["w.png"]
    assert (tmp_path / "w.png").read_bytes() == red.getvalue()  # OSWorld's getter: the image
    with pytest.raises(SetupFailed, match="there is no file '/home/user/none.png'"):
        run_setup(control, [step("change_wallpaper", path="~/none.png")])
