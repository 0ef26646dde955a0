"""OSWorld's own metric functions (vendored, see README.md), loaded for differential tests.

``reference_metrics()`` imports the vendored modules once, with ``absent.standing_in`` for the
libraries this machine lacks, and returns every public function by name. The vendored package
is named ``desktop_env`` as in OSWorld, so its own absolute imports work unchanged; this folder
is on ``sys.path`` only while the modules are imported.

OSWorld's ``compare_urls`` splits host names with ``tldextract.extract``, whose default extractor
fetches the public-suffix list over the network on first use (and caches it on disk). The tests
have no network and must give the same verdicts on every machine, so ``offline_suffix_list``
replaces that default with an extractor that reads only the snapshot tldextract ships.
"""

import functools
import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tldextract.tldextract

from tests.osworld_reference.absent import standing_in

HERE = Path(__file__).resolve().parent
MODULES = (
    "basic_os",
    "chrome",
    "docs",
    "general",
    "gimp",
    "others",
    "pdf",
    "slides",
    "table",
    "thunderbird",
    "utils",
    "vlc",
    "vscode",
)


def offline_suffix_list() -> None:
    """Make ``tldextract.extract`` use its bundled public-suffix snapshot: no download, no disk
    cache. Tandem's code never uses tldextract; this changes only the reference's library."""
    tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@functools.cache
def reference_metrics() -> dict[str, Callable[..., Any]]:
    """OSWorld's functions by name, across its metric modules (no metric name is defined in
    two of them)."""
    offline_suffix_list()
    functions: dict[str, Callable[..., Any]] = {}
    sys.path.insert(0, str(HERE))
    try:
        with standing_in():
            for name in MODULES:
                module = importlib.import_module(f"desktop_env.evaluators.metrics.{name}")
                for attribute, value in vars(module).items():
                    if inspect.isfunction(value) and value.__module__ == module.__name__:
                        functions[attribute] = value
    finally:
        sys.path.remove(str(HERE))
    return functions
