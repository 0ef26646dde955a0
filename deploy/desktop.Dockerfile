# syntax=docker/dockerfile:1
# The desktop image: one desktop per container (provider "docker"), and the layout of the AMI of
# the aws provider. `make desktop-image` builds it (deploy/dev.sh), from the repository root:
#   podman build --build-arg BASE=tandem-debian:bookworm -f deploy/desktop.Dockerfile \
#     -t tandem-desktop:latest .
# BASE is any Debian 12 image: debian:bookworm-slim where a registry is reachable, or the one
# dev.sh makes from Debian's packages (mmdebstrap, then podman import) where none is.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
# Where the build machine's own certificate bundle is mounted, when its HTTPS goes through a
# proxy that Debian's bundle does not know (dev.sh mounts it); empty elsewhere.
ARG PIP_CERT=

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The X server, window manager and VNC server the agent starts; the applications of OSWorld's
# domains that Debian ships (Chrome's tasks run on Chromium, which answers to google-chrome
# too); the tools tasks' setups call (python3, also as `python`, with pyautogui, socat, xdotool,
# wmctrl); fonts.
# pyautogui comes without its dependencies from PyPI: Debian's python-xlib and Pillow serve it
# (PyPI's python-xlib would shadow Debian's, which the agent's window list uses).
# dbus-x11 gives the GTK programs the session bus they ask for; the agent starts one session bus
# with the AT-SPI accessibility bus (at-spi2-core) on it, and reads the programs' accessibility
# trees with the system's python3-pyatspi.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        xvfb openbox x11vnc x11-utils x11-xserver-utils xdotool wmctrl xclip xsel \
        xterm mousepad pcmanfm \
        chromium \
        libreoffice-calc libreoffice-writer libreoffice-impress libreoffice-gtk3 \
        gimp thunderbird vlc \
        python3 python-is-python3 python3-venv python3-pip python3-xlib python3-tk python3-pil \
        xdg-utils shared-mime-info desktop-file-utils file socat curl ca-certificates dbus-x11 \
        dbus-daemon dbus-bin at-spi2-core python3-pyatspi \
        fonts-dejavu-core fonts-liberation fonts-noto-color-emoji \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s /usr/bin/chromium /usr/local/bin/google-chrome \
    && pip3 install --break-system-packages --no-deps ${PIP_CERT:+--cert "$PIP_CERT"} \
        "pyautogui>=0.9.54" pymsgbox pytweening pyscreeze pygetwindow pyrect mouseinfo pyperclip

# For the aws provider, whose agent runs on a machine of its own and captures the screen there:
# its Python environment (X input and capture) and the project's vm_pool. Container desktops
# do not use these: the platform drives them through their X socket, with the agent's code
# bind-mounted from the platform.
RUN python3 -m venv /opt/tandem/venv \
    && /opt/tandem/venv/bin/pip install ${PIP_CERT:+--cert "$PIP_CERT"} \
        "python-xlib>=0.33" "mss>=10.2,<11" "Pillow>=10.0" "isal>=1.6" "numpy>=1.26"
COPY vm_pool /opt/tandem/vm_pool

# The desktop's user, as OSWorld's tasks expect it: `user`, HOME /home/user. A container runs
# it as the desktop's own host uid (the provider mounts a passwd naming that uid `user`); the
# AMI keeps uid 1000.
RUN groupadd --gid 1000 user \
    && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/user --shell /bin/bash user \
    && install -d -o user -g user -m 0700 /etc/tandem /var/lib/tandem \
    && install -d -m 1777 /tmp/.X11-unix
COPY --chown=1000:1000 vm_pool/home_template/ /home/user/

# Chromium's own sandbox needs user namespaces that the engine's seccomp profile refuses; the
# container is the sandbox.
# --test-type: no "unsupported command-line flag" bar over every page the model sees.
# --force-renderer-accessibility: the pages' accessibility trees, which evaluators read.
RUN echo 'export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox --test-type --force-renderer-accessibility"' > /etc/chromium.d/tandem-sandbox

# LibreOffice starts as a task expects it: no tip of the day, no first-start notices, and saves
# a document in its own format without asking.
COPY deploy/desktop/libreoffice-tandem.xcd /usr/lib/libreoffice/share/registry/tandem.xcd
# sudo runs a command as the desktop's user: no one is root on a desktop (deploy/desktop/sudo).
COPY --chmod=755 deploy/desktop/sudo /usr/local/bin/sudo

USER user
WORKDIR /home/user
ENV PYTHONPATH=/opt/tandem
# -s -P: nothing of HOME or the working directory on the agent's import path (vm_pool.agent).
CMD ["/opt/tandem/venv/bin/python", "-s", "-P", "-m", "vm_pool.agent", "--config", "/etc/tandem/agent.json"]
