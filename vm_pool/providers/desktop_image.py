"""The desktop image: what a container image or machine image for desktops holds, and how its
agent is configured.

The ``aws`` provider runs each desktop in a machine of its own, an AMI with the layout of
``deploy/desktop.Dockerfile``: a non-root user whose HOME is
the template's fresh HOME, the project's ``vm_pool`` package with a Python environment for the
agent, and the desktop programs. Inside the machine the agent serves on fixed ports, bound to
all of the machine's interfaces; who can reach them is decided outside it (a port published on
127.0.0.1 or a private address, a security group).
"""

from typing import Any

from vm_pool.desktop import DesktopSpec

USER = "user"
UID = 1000  # fixed in the image, so that files copied in can be owned by the desktop's user
HOME = "/home/user"
APP_DIR = "/opt/tandem"  # holds vm_pool/ and the agent's Python environment in venv/
PYTHON = f"{APP_DIR}/venv/bin/python"
CONFIG_DIR = "/etc/tandem"
CONFIG_PATH = f"{CONFIG_DIR}/agent.json"
WORK_DIR = "/var/lib/tandem"  # the agent's logs
DISPLAY = 1
VNC_PORT = 5900
CONTROL_PORT = 7000
# -s -P: nothing of HOME or the working directory on the import path (``vm_pool.agent``);
# vm_pool comes from PYTHONPATH, APP_DIR.
AGENT_COMMAND = (PYTHON, "-s", "-P", "-m", "vm_pool.agent", "--config", CONFIG_PATH)


def agent_config(spec: DesktopSpec) -> dict[str, Any]:
    """The agent's config for a desktop in its own machine; it holds the desktop's agent key.

    Its VNC server is view-only and has no password: only the platform's websockify can reach
    the published port (127.0.0.1 or a private address), and no browser is given a secret."""
    return {
        "display": DISPLAY,
        "width": spec.screen.width,
        "height": spec.screen.height,
        "listen": f"0.0.0.0:{CONTROL_PORT}",
        "vnc_listen": f"0.0.0.0:{VNC_PORT}",
        "agent_key": spec.agent_key,
        "home": HOME,
        "work_dir": WORK_DIR,
        "autostart": [list(argv) for argv in spec.autostart],
        "window_manager": ["openbox", "--config-file", f"{HOME}/.config/openbox/rc.xml"],
    }
