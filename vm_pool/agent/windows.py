"""When a desktop's window manager is ready: it manages a window mapped now (``vm_pool.agent``
waits for it before the desktop counts as started). Needs python-xlib and the X server.

Openbox announces itself (``_NET_SUPPORTING_WM_CHECK``) before it handles requests, and a
program whose window asks for management in its first moments waits for an answer that comes
late: seen here, an xterm starts 5 s late (Xt's wait for the window manager) and a GTK window
stays unmapped 20 s. A task's setup launches programs the moment the desktop is ready, so ready
means managing.
"""

import time

PROBE_S = 0.5  # a probe window not managed by then is destroyed and another one mapped


def wait_for_window_manager(display: str, timeout: float) -> None:
    """Until the window manager manages a 1x1 probe window, mapped afresh every ``PROBE_S``
    until it shows in ``_NET_CLIENT_LIST``, then destroyed (and gone from the list)."""
    from Xlib import X
    from Xlib.display import Display

    x = Display(display)
    try:
        root = x.screen().root
        clients = x.intern_atom("_NET_CLIENT_LIST")

        def managed() -> set[int]:
            prop = root.get_full_property(clients, X.AnyPropertyType)
            return set(prop.value) if prop is not None else set()

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            probe = root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
            probe.map()
            x.sync()
            shown = False
            until = min(deadline, time.monotonic() + PROBE_S)
            while not shown and time.monotonic() < until:
                shown = probe.id in managed()
                time.sleep(0.01)
            probe.destroy()
            x.sync()
            if shown:
                while probe.id in managed() and time.monotonic() < deadline:
                    time.sleep(0.01)
                return
    finally:
        x.close()
    raise RuntimeError(f"the window manager managed no window in {timeout}s")
