"""A probe that runs as a program on a desktop and tries to leave it.

The sandbox tests put this file into a desktop and run it there with the desktop's
``python3``, through the agent, the way a task's program runs. It gets its targets as JSON in
``argv[1]`` and prints one JSON object: for every attempt, ``"blocked: …"`` or ``"REACHED: …"``.
It imports only the standard library and python-xlib (a Debian package on every desktop).
"""

import json
import os
import socket
import sys
from pathlib import Path


def attempt(results: dict[str, str], name: str, action) -> None:
    try:
        detail = action()
    except Exception as error:  # any failure means the probe did not get through
        results[name] = f"blocked: {type(error).__name__}: {error}"
    else:
        results[name] = f"REACHED: {detail}"[:300]


def connect_tcp(host: str, port: int) -> str:
    with socket.create_connection((host, port), timeout=2) as conn:
        return f"connected to {conn.getpeername()}"


def connect_unix(path: str) -> str:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(2)
        conn.connect(path)
        return f"connected to {path}"


def read(path: str) -> str:
    return Path(path).read_bytes()[:80].decode(errors="replace")


def write(path: str) -> str:
    Path(path).write_text("probe")
    return f"wrote {path}"


def open_display(name: str) -> str:
    from Xlib.display import Display

    display = Display(name)
    try:
        return f"opened {name}: {display.screen().width_in_pixels} px wide"
    finally:
        display.close()


def host_processes() -> str:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    # The desktop's own processes are its agent, X, window manager, VNC and this probe.
    foreign = [
        line
        for line in lines
        if any(word in line for word in ("pytest", "postgres", "redis", "celery", "uvicorn"))
    ]
    if foreign:
        return f"sees host processes: {foreign[:3]}"
    raise PermissionError(f"only its own {len(lines)} processes are visible")


def secret_variables() -> str:
    found = [name for name in os.environ if name.startswith(("TANDEM", "AWS", "DJANGO"))]
    for path in Path("/proc").glob("[0-9]*/environ"):
        try:
            text = path.read_bytes().decode(errors="replace")
        except OSError:
            continue
        found += [v.split("=")[0] for v in text.split("\0") if v.startswith(("TANDEM", "AWS"))]
    if found:
        return f"found {sorted(set(found))}"
    raise PermissionError("no TANDEM_, AWS_ or DJANGO_ variable in any visible environment")


def main() -> None:
    targets = json.loads(sys.argv[1])
    results: dict[str, str] = {}
    for name, (host, port) in targets["tcp"].items():
        attempt(results, f"tcp {name} {host}:{port}", lambda h=host, p=port: connect_tcp(h, p))
    for path in targets["unix"]:
        attempt(results, f"unix {path}", lambda p=path: connect_unix(p))
    for path in targets["read"]:
        attempt(results, f"read {path}", lambda p=path: read(p))
    for path in targets["write"]:
        attempt(results, f"write {path}", lambda p=path: write(p))
    for name in targets["displays"]:
        attempt(results, f"display {name}", lambda n=name: open_display(n))
    attempt(results, "host processes", host_processes)
    attempt(results, "secret variables", secret_variables)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
