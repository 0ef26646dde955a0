"""Getters of what running applications say: what VLC plays, what a VS Code command writes,
which program opens videos.

- ``vlc_playing_info``: VLC's web interface's ``status.xml``, asked from inside the desktop
  (``curl`` to its loopback, port ``VLC_PORT``, password ``VLC_PASSWORD``, as OSWorld's desktops
  run VLC); the file goes to the metric as it came.
- ``vscode_config``: runs a VS Code command as OSWorld does (the command palette, the command's
  name, Enter), waits a second, then fetches the file it wrote.
- ``default_video_player``: asks ``xdg-mime`` for the default program of each of OSWorld's video
  types in one command; the reader ``most_common_program`` names the program that most types
  open with (``unknown`` when none has one).
"""

import shlex
import time
from typing import Any

from vm_pool.actions import Action, ActionType
from vm_pool.evaluation.getters.base import Gathered, Getter, Reading, failed, given, read, require
from vm_pool.evaluation.getters.files import vm_file

VLC_PORT = 8080
VLC_PASSWORD = "password"
VLC_TIMEOUT_S = 10
VSCODE_COMMAND_WAIT_S = 1.0
XDG_MIME_TIMEOUT_S = 60

# OSWorld's list as it asks it, most types twice (a tie goes to the first program met).
VIDEO_TYPES = (  # noqa: SIM905 (85 names read better as text)
    "3gp 3gp 3gpp 3gpp 3gpp2 3gpp2 avi avi divx divx dv dv fli fli flv flv mp2t mp2t mp4 "
    "mp4 mp4v-es mp4v-es mpeg mpeg mpeg-system mpeg-system msvideo msvideo ogg ogg "
    "quicktime quicktime vnd.divx vnd.divx vnd.mpegurl vnd.mpegurl vnd.rn-realvideo "
    "vnd.rn-realvideo webm webm x-anim x-anim x-avi x-avi x-flc x-flc x-fli x-fli x-flv "
    "x-flv x-m4v x-m4v x-matroska x-matroska x-mpeg x-mpeg x-mpeg-system x-mpeg-system "
    "x-mpeg2 x-mpeg2 x-ms-asf x-ms-asf x-ms-asf-plugin x-ms-asf-plugin x-ms-asx x-ms-asx "
    "x-ms-wm x-ms-wm x-ms-wmv x-ms-wmv x-ms-wmx x-ms-wmx x-ms-wvx x-ms-wvx x-msvideo "
    "x-msvideo x-nsv x-nsv x-ogm x-ogm x-ogm+ogg x-theora x-theora x-theora+ogg "
    "x-theora+ogg"
).split()


def vlc_playing_info(reading: Reading, config: dict[str, Any]) -> Gathered:
    url = f"http://127.0.0.1:{VLC_PORT}/requests/status.xml"
    answer = reading.control.run(
        ["curl", "-sS", "-f", "-m", str(VLC_TIMEOUT_S), "-u", f":{VLC_PASSWORD}", url],
        timeout=VLC_TIMEOUT_S + 5,
    )
    if answer.returncode != 0:
        return failed(f"VLC's web interface did not answer: {answer.output[-200:]}")
    name = str(require(config, "dest"))
    return given({}, {0: reading.store(name, answer.stdout.encode())})


def vscode_config(reading: Reading, config: dict[str, Any]) -> Gathered:
    command = str(require(config, "vscode_extension_command"))
    for action in (
        Action(ActionType.HOTKEY, keys=("ctrl", "shift", "p")),
        Action(ActionType.TYPE, content=command),
        Action(ActionType.HOTKEY, keys=("enter",)),
    ):
        reading.control.execute(action)
    time.sleep(VSCODE_COMMAND_WAIT_S)
    return vm_file(reading, {"path": require(config, "path"), "dest": require(config, "dest")})


def default_video_player(reading: Reading, config: dict[str, Any]) -> Gathered:
    types = " ".join(shlex.quote(f"video/{kind}") for kind in VIDEO_TYPES)
    # Each answer (one line, or nothing) ends with a NUL: the reader splits them there.
    script = f"for type in {types}; do xdg-mime query default \"$type\"; printf '\\0'; done"
    answers = reading.control.run(["bash", "-c", script], timeout=XDG_MIME_TIMEOUT_S)
    return read("most_common_program", text=answers.stdout)


GETTERS: dict[str, Getter] = {
    "vlc_playing_info": vlc_playing_info,
    "vscode_config": vscode_config,
    "default_video_player": default_video_player,
}
