"""A desktop program with a slow dialog: every key press toggles a dialog window, shown or
hidden 300–1500 ms after the press (a GTK file dialog that takes its time to draw, say).

Run on a desktop with the system's ``python3`` (python-xlib): ``python3 slow_dialog.py SEED``.
The delays come from a seeded random generator, so a run can be repeated. It prints nothing;
its main window's title is "slow-dialog", the dialog's "slow-dialog-open".
"""

import random
import sys
import threading
import time

from Xlib import X, display

WIDTH, HEIGHT = 500, 300


def main() -> None:
    rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    x = display.Display()
    screen = x.screen()
    main_window = screen.root.create_window(
        40, 40, WIDTH, HEIGHT, 0, screen.root_depth,
        background_pixel=screen.white_pixel,
        event_mask=X.KeyPressMask | X.ExposureMask,
    )  # fmt: skip
    main_window.set_wm_name("slow-dialog")
    main_window.map()
    # Not managed by the window manager, so that it never takes the keyboard focus.
    dialog = screen.root.create_window(
        200, 200, 420, 260, 0, screen.root_depth, background_pixel=0x3366CC, override_redirect=True
    )
    dialog.set_wm_name("slow-dialog-open")
    x.flush()
    shown = [False]
    lock = threading.Lock()

    def toggle(delay: float) -> None:
        time.sleep(delay)
        with lock:
            if shown[0]:
                dialog.unmap()
            else:
                dialog.map()
            shown[0] = not shown[0]
            x.flush()

    while True:
        event = x.next_event()
        if event.type == X.KeyPress:
            threading.Thread(target=toggle, args=(rng.uniform(0.3, 1.5),), daemon=True).start()


if __name__ == "__main__":
    main()
