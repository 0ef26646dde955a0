#!/usr/bin/env bash
# Prepares a Debian machine for Tandem and starts what it needs. Idempotent: each step checks
# first and does nothing when its work is already done, so a second run takes seconds.
#
#   deploy/dev.sh install    system packages, the Python virtual environment, the web app's
#                            build, the tests' tools
#   deploy/dev.sh services   PostgreSQL and Redis running, the tandem role and database present
#   deploy/dev.sh start      web (uvicorn), Celery workers and beat, websockify and the demo
#                            endpoint in the background, logs in var/log
#   deploy/dev.sh stop       stops what 'start' started
#   deploy/dev.sh engine     the container engine (podman with runc) and its Docker-compatible
#                            API service on /run/podman/podman.sock
#   deploy/dev.sh desktop-image
#                            the container desktops' image, tandem-desktop:latest, built when
#                            what it is made of changed (its base from Debian's packages when
#                            no registry is reachable); desktop-image-recipe prints that hash
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${TANDEM_VENV:-$ROOT/.venv}
PY=${TANDEM_PYTHON:-python3.11}
VAR=$ROOT/var
APT_PACKAGES=(
  postgresql redis-server python3-venv
  # desktops: the X server, window manager, VNC server and the template's programs
  xvfb openbox x11vnc xterm mousepad pcmanfm chromium x11-utils x11-xserver-utils xdg-utils
  fonts-dejavu-core
  # each desktop's sandbox (bubblewrap), the agent's window list inside it (the system's python3
  # with python-xlib), and user-mode networking for desktops allowed on the internet
  bubblewrap python3-xlib slirp4netns nftables
  # each desktop's session bus and accessibility bus, and the agent's reader of its AT-SPI tree
  dbus-daemon dbus-bin at-spi2-core python3-pyatspi
  # X tools the tests drive
  xclip xsel xdotool
  # OSWorld task setups and evaluators: window activation (EWMH), port forwarding to the browser
  wmctrl socat
  # the baseline proposer reads the screen with OCR
  tesseract-ocr
  # container desktops: the engine (rootful podman; runc, as crun refuses hybrid cgroups) and
  # the tool that makes a base image from Debian's packages
  podman runc catatonit mmdebstrap
)
PIP_EXTRAS=${TANDEM_PIP_EXTRAS:-test}

log() { printf '\033[1m[tandem]\033[0m %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_system() {
  local missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  # python3-venv is only needed when the interpreter cannot make a venv by itself.
  if [ ${#missing[@]} -eq 1 ] && [ "${missing[0]}" = python3-venv ] && "$PY" -m venv --help >/dev/null 2>&1; then
    missing=()
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

install_python() {
  local stamp="$VENV/.tandem-installed"
  local want
  want=$(cat pyproject.toml | sha256sum | cut -c1-16)-$PIP_EXTRAS
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return
  fi
  [ -x "$VENV/bin/python" ] || { log "creating $VENV"; "$PY" -m venv "$VENV"; }
  log "installing Python packages (.[$PIP_EXTRAS])"
  "$VENV/bin/pip" install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v WARNING || true
  "$VENV/bin/pip" install -q --disable-pip-version-check -e ".[$PIP_EXTRAS]" 2>&1 | grep -v "WARNING: Location" || true
  "$VENV/bin/python" -c "import django, rest_framework, celery, channels, psycopg" \
    || { log "Python packages failed to install"; exit 1; }
  echo "$want" >"$stamp"
}

# The streaming tests drive the real noVNC client (tests/vnc_client, from its lock file) in
# Chromium, read the X pointer with xdotool and paint the root window with xsetroot.
install_test_tools() {
  [[ ",$PIP_EXTRAS," == *",test,"* ]] || return 0
  local missing=()
  for pkg in chromium xdotool x11-xserver-utils; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages for the tests: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  local client=$ROOT/tests/vnc_client want
  want=$(sha256sum "$client/package-lock.json" | cut -c1-16)
  if [ "$(cat "$client/node_modules/.tandem-installed" 2>/dev/null)" != "$want" ]; then
    log "installing noVNC for the streaming tests"
    (cd "$client" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" >"$client/node_modules/.tandem-installed"
  fi
}

# The web app (frontend/): npm ci from its lock file, then a production build into
# frontend/dist, which Django serves. Both are skipped when their inputs have not changed.
install_frontend() {
  if ! command -v npm >/dev/null 2>&1; then
    log "installing npm for the web app"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
  local app=$ROOT/frontend lock sources
  lock=$(sha256sum "$app/package-lock.json" | cut -c1-16)
  if [ "$(cat "$app/node_modules/.tandem-installed" 2>/dev/null)" != "$lock" ]; then
    log "installing the web app's packages"
    (cd "$app" && npm ci --no-audit --no-fund --loglevel=error) || { log "npm ci failed in frontend/"; exit 1; }
    echo "$lock" >"$app/node_modules/.tandem-installed"
  fi
  sources=$(cd "$app" && sha256sum package-lock.json package.json index.html vite.config.ts \
    tsconfig.json $(find src -type f | sort) | sha256sum | cut -c1-16)
  if [ ! -f "$app/dist/index.html" ] || [ "$(cat "$app/node_modules/.tandem-built" 2>/dev/null)" != "$sources" ]; then
    log "building the web app"
    local out
    out=$(cd "$app" && npm run build --silent 2>&1) || { echo "$out" | tail -30; log "the web app did not build"; exit 1; }
    echo "$sources" >"$app/node_modules/.tandem-built"
  fi
}

start_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then return; fi
  log "starting PostgreSQL"
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -n | tail -1)
  [ -n "$version" ] || { log "PostgreSQL is not installed"; exit 1; }
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && return; sleep 1; done
  log "PostgreSQL did not come up"; exit 1
}

start_redis() {
  if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then return; fi
  log "starting Redis"
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/tandem.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && return; sleep 0.5; done
  log "Redis did not come up"; exit 1
}

ensure_database() {
  local psql=(as_root runuser -u postgres -- psql -v ON_ERROR_STOP=1 -qtA)
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname='tandem'")" != 1 ]; then
    log "creating PostgreSQL role tandem"
    "${psql[@]}" -c "CREATE ROLE tandem LOGIN PASSWORD 'tandem' CREATEDB"
  fi
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname='tandem'")" != 1 ]; then
    log "creating database tandem"
    "${psql[@]}" -c "CREATE DATABASE tandem OWNER tandem"
  fi
}

# This host's name, and its container engine when one answers: it then runs container desktops
# too (the OSWorld demo's applications are in the desktop image).
host_environment() {
  export TANDEM_HOST=${TANDEM_HOST:-$(hostname)}
  if curl -fsS --unix-socket "$ENGINE_SOCKET" http://d/_ping >/dev/null 2>&1; then
    export TANDEM_DOCKER_URL=${TANDEM_DOCKER_URL:-unix://$ENGINE_SOCKET}
    export TANDEM_HOST_PROVIDERS=${TANDEM_HOST_PROVIDERS:-local,docker}
  fi
}

start_app() {
  mkdir -p "$VAR/log" "$VAR/run"
  stop_app quiet
  host_environment
  # The demo's base model, once `manage.py demo_model` saved it, is a base model jobs may name.
  local demo_model=${TANDEM_DEMO_MODEL_DIR:-$VAR/models/demo-tiny-qwen}
  if [ -z "${TANDEM_BASE_MODELS:-}" ] && [ -f "$demo_model/config.json" ]; then
    export TANDEM_BASE_MODELS="${TANDEM_DEMO_BASE_MODEL:-demo-tiny-qwen}=$demo_model"
  fi
  local port=${TANDEM_PORT:-8000}
  log "starting web on :$port, Celery workers, beat, websockify and the demo endpoint (logs in var/log)"
  nohup "$VENV/bin/uvicorn" backend.asgi:application --host "${TANDEM_BIND:-127.0.0.1}" --port "$port" \
    --workers "${TANDEM_WEB_WORKERS:-2}" >"$VAR/log/web.log" 2>&1 &
  echo $! >"$VAR/run/web.pid"
  # This machine is a desktop host too: its worker owns the queue desktops.<host>. Its jobs
  # mostly wait on desktops (settle) and the model's jobs on the network: threads, not processes.
  TANDEM_DB_POOL_MAX=${TANDEM_WORKER_DB_POOL_MAX:-16} \
  nohup "$VENV/bin/celery" -A backend worker -Q "default,exports,desktops,desktops.$TANDEM_HOST" \
    --pool threads -c 8 -n "tandem@$TANDEM_HOST" \
    --loglevel INFO >"$VAR/log/worker.log" 2>&1 &
  echo $! >"$VAR/run/worker.pid"
  # The host's rollouts (queue rollouts.<host>): each runs whole in one job, so their steps'
  # work is spread over processes, one per core by default, each running a share of them in
  # threads; one process would run them all under one interpreter lock.
  local processes=${TANDEM_ROLLOUT_PROCESSES:-$(nproc)} threads=${TANDEM_ROLLOUT_THREADS:-4} i
  for i in $(seq 1 "$processes"); do
    TANDEM_DB_POOL_MAX=$((threads * 2)) \
    nohup "$VENV/bin/celery" -A backend worker -Q "rollouts.$TANDEM_HOST" \
      --pool threads -c "$threads" -n "rollouts$i@$TANDEM_HOST" \
      --loglevel INFO >"$VAR/log/rollout-worker-$i.log" 2>&1 &
    echo $! >"$VAR/run/rollout-worker-$i.pid"
  done
  nohup "$VENV/bin/celery" -A backend worker -Q model --pool threads -c 8 -n "model@$TANDEM_HOST" \
    --loglevel INFO >"$VAR/log/model-worker.log" 2>&1 &
  echo $! >"$VAR/run/model-worker.pid"
  # Fine-tuning jobs run on the train queue, one at a time. A GPU host runs this worker; here it
  # trains on the CPU, where the training libraries are installed (the test extra has them).
  if "$VENV/bin/python" -c "import torch, trl, peft" >/dev/null 2>&1; then
    nohup "$VENV/bin/celery" -A backend worker -Q train --pool solo -n "train@$TANDEM_HOST" \
      --loglevel INFO >"$VAR/log/train-worker.log" 2>&1 &
    echo $! >"$VAR/run/train-worker.pid"
  else
    log "no training libraries in $VENV: fine-tuning jobs wait for a worker on the train queue"
  fi
  nohup "$VENV/bin/celery" -A backend beat --loglevel INFO -s "$VAR/run/celerybeat-schedule" \
    >"$VAR/log/beat.log" 2>&1 &
  echo $! >"$VAR/run/beat.pid"
  # One websockify fronts every desktop's VNC server; stream tokens are looked up in PostgreSQL,
  # and a control stream's input goes through the recording gate.
  nohup "$VENV/bin/python" -m vm_pool.recording.proxy \
    --token-source backend.settings "${TANDEM_WEBSOCKIFY_BIND:-127.0.0.1:6080}" \
    >"$VAR/log/websockify.log" 2>&1 &
  echo $! >"$VAR/run/websockify.pid"
  # The demo endpoint: scripted UI-TARS answers for the demo base model and its adapters.
  nohup "$VENV/bin/python" manage.py demo_endpoint >"$VAR/log/demo-endpoint.log" 2>&1 &
  echo $! >"$VAR/run/demo-endpoint.pid"
  for _ in $(seq 1 60); do
    curl -fsS "${TANDEM_DEMO_ENDPOINT:-http://127.0.0.1:8100/v1}/models" >/dev/null 2>&1 \
      && curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return
    sleep 0.5
  done
  log "the web server or the demo endpoint did not answer; see var/log/web.log and demo-endpoint.log"
  tail -20 "$VAR/log/web.log"; tail -5 "$VAR/log/demo-endpoint.log"; exit 1
}

stop_app() {
  local pidfile
  for pidfile in "$VAR"/run/{web,worker,model-worker,train-worker,beat,websockify,demo-endpoint}.pid \
    "$VAR"/run/rollout-worker-*.pid; do
    if [ -f "$pidfile" ]; then
      kill "$(cat "$pidfile")" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
  if [ "${1:-}" != quiet ]; then
    # Desktops run in sessions of their own: stop this host's explicitly.
    host_environment
    "$VENV/bin/python" manage.py stop_desktops || true
    log "stopped"
  fi
}

ENGINE_SOCKET=/run/podman/podman.sock
DESKTOP_IMAGE=${TANDEM_DESKTOP_IMAGE:-tandem-desktop:latest}
BASE_IMAGE=tandem-debian:bookworm

# Rootful podman with runc and cgroupfs (no systemd here), and ulimits no higher than this
# machine's hard limits (an unprivileged engine cannot raise them).
configure_engine() {
  local conf=/etc/containers/containers.conf.d/tandem.conf nofile nproc
  # Three quarters of the hard limits (a limit equal to this shell's was refused here), at most
  # 16384 open files and 32768 processes.
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=65536
  nofile=$((nofile * 3 / 4)); [ "$nofile" -gt 16384 ] && nofile=16384
  nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] && nproc=87381
  nproc=$((nproc * 3 / 4)); [ "$nproc" -gt 32768 ] && nproc=32768
  as_root mkdir -p "$(dirname "$conf")"
  as_root tee "$conf" >/dev/null <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
}

start_engine() {
  configure_engine
  if curl -fsS --unix-socket "$ENGINE_SOCKET" http://d/_ping >/dev/null 2>&1; then return; fi
  log "starting podman's Docker-compatible API on $ENGINE_SOCKET"
  as_root mkdir -p "$(dirname "$ENGINE_SOCKET")"
  # From /: the engine's helpers leave files (an "oom" mark) in their working directory.
  as_root bash -c "cd / && nohup podman system service --time=0 unix://$ENGINE_SOCKET >/var/log/tandem-podman.log 2>&1 &"
  for _ in $(seq 1 60); do
    curl -fsS --unix-socket "$ENGINE_SOCKET" http://d/_ping >/dev/null 2>&1 && return
    sleep 0.5
  done
  log "podman's API service did not answer; see /var/log/tandem-podman.log"; exit 1
}

# The desktop image is rebuilt only when what it is made of changed: its recipe (the Dockerfile
# and deploy/desktop/) and the vm_pool package it copies (the agent, the input and capture code
# a container desktop runs). A label holds their hash.
desktop_image_recipe() {
  { cat deploy/desktop.Dockerfile deploy/desktop/*
    find vm_pool -type f ! -path '*/__pycache__/*' | LC_ALL=C sort | xargs cat; } |
    sha256sum | cut -c1-16
}

build_desktop_image() {
  configure_engine
  local recipe=deploy/desktop.Dockerfile want have
  want=$(desktop_image_recipe)
  have=$(as_root podman image inspect --format '{{ index .Labels "tandem.recipe" }}' "$DESKTOP_IMAGE" 2>/dev/null || true)
  [ "$have" = "$want" ] && return
  if ! as_root podman image exists "$BASE_IMAGE"; then
    log "making the base image $BASE_IMAGE from Debian's packages (mmdebstrap)"
    local tar
    tar=$(mktemp --suffix=.tar)
    as_root mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$tar"
    as_root podman import --quiet "$tar" "$BASE_IMAGE" >/dev/null
    rm -f "$tar"
  fi
  log "building the desktop image $DESKTOP_IMAGE (a few minutes, once)"
  # This machine's certificate bundle, for a network whose HTTPS proxy Debian's does not know.
  local host_ca=() bundle=/etc/ssl/certs/ca-certificates.crt
  [ -f "$bundle" ] && host_ca=(--volume "$bundle:/run/host-ca.pem:ro" --build-arg PIP_CERT=/run/host-ca.pem)
  as_root podman build --quiet "${host_ca[@]}" --build-arg "BASE=$BASE_IMAGE" --label "tandem.recipe=$want" \
    -f "$recipe" -t "$DESKTOP_IMAGE" . >/dev/null
}

case "${1:-}" in
  install) install_system; install_python; install_frontend; install_test_tools ;;
  services) start_postgres; start_redis; ensure_database ;;
  start) start_app ;;
  stop) stop_app ;;
  engine) start_engine ;;
  desktop-image) start_engine; build_desktop_image ;;
  desktop-image-recipe) desktop_image_recipe ;;
  *) echo "usage: $0 install|services|start|stop|engine|desktop-image|desktop-image-recipe" >&2
     exit 2 ;;
esac
