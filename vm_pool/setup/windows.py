"""Setup steps that act on the desktop's windows and background, with OSWorld's meaning.

Windows are found and acted on through the window manager's EWMH hints with ``wmctrl``, run in
the desktop as its user: ``activate_window`` raises and focuses the first window whose title
holds ``window_name`` (``strict``: the whole title, case-sensitive; ``by_class``: its WM_CLASS
instead), ``close_window`` asks it to close. Like OSWorld, a window that is not there is
logged and the setup goes on.

``change_wallpaper`` shows an image of the desktop (``path``) as its background, through the
file manager's desktop (``pcmanfm --desktop``), which draws it under every window.
"""

from vm_pool.desktop import DesktopControl
from vm_pool.setup.base import SetupFailed, SetupRun, SetupStep, home_path

WALLPAPER_CONFIG = "~/.config/pcmanfm/default/desktop-items-0.conf"


def _wmctrl_flags(step: SetupStep, verb: str) -> str:
    by_class = "x" if step.parameters.get("by_class") else ""
    strict = "F" if step.parameters.get("strict") else ""
    return f"-{by_class}{strict}{verb}"


def _window_name(step: SetupStep) -> str:
    name = step.parameters.get("window_name")
    if not isinstance(name, str) or not name:
        raise SetupFailed(f"{step.name()}: 'window_name' must be a non-empty string")
    return name


def _wmctrl(run: SetupRun, step: SetupStep, verb: str) -> None:
    name = _window_name(step)
    result = run.control.run(["wmctrl", _wmctrl_flags(step, verb), name], timeout=10)
    if result.returncode != 0:
        run.note(step, f"no window {name!r} (wmctrl exited with {result.returncode})")


def activate_window(run: SetupRun, step: SetupStep) -> None:
    _wmctrl(run, step, "a")


def close_window(run: SetupRun, step: SetupStep) -> None:
    _wmctrl(run, step, "c")


def window_exists(control: DesktopControl, name: str) -> bool:
    listed = control.run(["wmctrl", "-l"], timeout=10)
    return any(name in line.split(None, 3)[-1] for line in listed.stdout.splitlines() if line)


def change_wallpaper(run: SetupRun, step: SetupStep) -> None:
    path = step.parameters.get("path")
    if not isinstance(path, str) or not path:
        raise SetupFailed(f"{step.name()}: 'path' must be a non-empty string")
    path = home_path(path)
    if run.control.run(["test", "-f", path], timeout=10).returncode != 0:
        raise SetupFailed(f"{step.name()}: there is no file {path!r} on the desktop")
    if run.control.run(["pgrep", "-f", "pcmanfm --desktop"], timeout=10).returncode != 0:
        run.control.launch(["pcmanfm", "--desktop"], window_timeout=5)
    result = run.control.run(
        ["pcmanfm", f"--set-wallpaper={path}", "--wallpaper-mode=stretch"], timeout=20
    )
    if result.returncode != 0:
        raise SetupFailed(f"{step.name()}: the wallpaper was not set: {result.output[-300:]}")
