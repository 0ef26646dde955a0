# syntax=docker/dockerfile:1
# The desktop image: one desktop per container (provider "docker"), led by the in-desktop agent.
# Built from the repository root:
#   docker build -f deploy/desktop.Dockerfile -t tandem-desktop:latest .
# The layout (user, paths, ports) is the one vm_pool/providers/desktop_image.py describes; an AMI
# for the aws provider carries the same layout.
FROM debian:bookworm-slim

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The X server, window manager and VNC server the agent starts; the programs tasks use; the
# fonts they render with. dbus-x11 gives mousepad and pcmanfm the session bus they ask for.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        xvfb \
        openbox \
        x11vnc \
        x11-utils \
        xdotool \
        xterm \
        mousepad \
        pcmanfm \
        chromium \
        dbus-x11 \
        fonts-dejavu-core \
        fonts-liberation \
        fonts-noto-color-emoji \
        python3 \
        python3-venv \
        ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# The agent needs the standard library, and for actions and screenshots X input and capture
# (python-xlib, mss, Pillow, isal, numpy). No Django: nothing in the desktop imports it.
RUN python3 -m venv /opt/tandem/venv \
    && /opt/tandem/venv/bin/pip install \
        "python-xlib>=0.33" \
        "mss>=10.2,<11" \
        "Pillow>=10.0" \
        "isal>=1.6" \
        "numpy>=1.26"

# The desktop's user has uid 1000: the provider copies the agent's config into a new container
# as a file owned by that uid. The config and work directories are the user's alone.
RUN groupadd --gid 1000 tandem \
    && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/tandem --shell /bin/bash tandem \
    && install -d -o tandem -g tandem -m 0700 /etc/tandem /var/lib/tandem \
    && install -d -m 1777 /tmp/.X11-unix

# Chromium's own sandbox needs user namespaces that Docker's default seccomp profile refuses;
# here the container is the sandbox.
RUN echo 'export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox"' > /etc/chromium.d/tandem-sandbox

# vm_pool holds everything the agent imports from the project (the agent, the action space,
# the X11 controller); the HOME template becomes the fresh HOME of every container.
COPY vm_pool /opt/tandem/vm_pool
COPY --chown=1000:1000 vm_pool/home_template/ /home/tandem/

USER tandem
WORKDIR /opt/tandem
ENV PYTHONPATH=/opt/tandem
EXPOSE 5900 7000
CMD ["/opt/tandem/venv/bin/python", "-m", "vm_pool.agent", "--config", "/etc/tandem/agent.json"]
