"""Debian's Chromium as tests and benchmarks start it: headless or on a desktop, no network of
its own, nothing downloaded at run time."""

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
