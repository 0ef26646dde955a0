"""A desktop program whose screen never stops changing, periodically: a selection border that
blinks every 500 ms (as Impress draws around a table being inserted) and a spinner of eight
positions turning every 125 ms.

Run on a desktop with the system's ``python3`` (python-xlib): ``python3 blinker.py border`` (the
border alone) or ``python3 blinker.py spinner`` (both). Its window's title is "blinker".
"""

import sys
import time

from Xlib import X, display

WIDTH, HEIGHT = 480, 320
SPINNER = 8


def main() -> None:
    x = display.Display()
    screen = x.screen()
    window = screen.root.create_window(
        60, 60, WIDTH, HEIGHT, 0, screen.root_depth,
        background_pixel=screen.white_pixel, event_mask=X.ExposureMask,
    )  # fmt: skip
    window.set_wm_name("blinker")
    window.map()
    ink = window.create_gc(foreground=0x2255CC, line_width=6)
    paper = window.create_gc(foreground=screen.white_pixel, line_width=6)
    dot = window.create_gc(foreground=0xCC3322)
    spinning = sys.argv[1:] == ["spinner"]
    tick = 0
    while True:
        while x.pending_events():
            x.next_event()
        border = ink if (tick // 4) % 2 == 0 else paper  # every 4 ticks of 125 ms
        window.rectangle(border, 40, 40, 240, 160)
        if spinning:
            window.fill_rectangle(paper, 320, 60, 120, 120)
            offsets = [
                (0, -40),
                (28, -28),
                (40, 0),
                (28, 28),
                (0, 40),
                (-28, 28),
                (-40, 0),
                (-28, -28),
            ]
            dx, dy = offsets[tick % SPINNER]
            window.fill_arc(dot, 380 + dx - 10, 120 + dy - 10, 20, 20, 0, 360 * 64)
        x.flush()
        tick += 1
        time.sleep(0.125)


if __name__ == "__main__":
    main()
