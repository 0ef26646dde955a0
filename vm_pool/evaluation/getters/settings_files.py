"""Getters of applications' settings and state: VLC, GIMP."""

from typing import Any

from vm_pool.evaluation.getters.base import Gathered, Getter, Reading, require
from vm_pool.evaluation.getters.files import vm_file

VLC_CONFIG = "~/.config/vlc/vlcrc"
GIMP_CONFIG = "~/.config/GIMP/2.10"


def vlc_config(reading: Reading, config: dict[str, Any]) -> Gathered:
    return vm_file(reading, {"path": VLC_CONFIG, "dest": config.get("dest", "vlcrc")})


def gimp_config_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    name = str(require(config, "file_name"))
    return vm_file(reading, {"path": f"{GIMP_CONFIG}/{name}", "dest": config.get("dest", name)})


GETTERS: dict[str, Getter] = {
    "vlc_config": vlc_config,
    "gimp_config_file": gimp_config_file,
}
