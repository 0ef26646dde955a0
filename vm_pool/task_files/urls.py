"""What a task takes from the task-file cache (``TaskFile``), read from its OSWorld content.

A task's setup and its evaluator name files by URL: ``download`` steps (in the setup and in
the evaluator's ``postconfig``), the evaluator's ``cloud_file`` getters (a URL, or a list of
them; ``cache_file`` names a file the postconfig's commands wrote, never a URL), and
``update_browse_history`` steps, which start from
OSWorld's empty Chrome history file. ``missing_urls`` says which of them the cache lacks, so a
manager can upload them before anyone claims the task on a platform with no way out.

The walkers over a task's steps and getters live here too, as every reader of OSWorld's task
structure (the importer, the coverage report) needs the same walk.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from vm_pool.models import TaskFile
from vm_pool.task_files.downloads import url_key

FILE_GETTERS = ("cloud_file",)
# OSWorld's empty Chrome history, which ``update_browse_history`` steps start from.
EMPTY_CHROME_HISTORY_URL = (
    "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/chrome/"
    "44ee5668-ecd5-4366-a6ce-c1c9b8d4e938/history_empty.sqlite?download=true"
)


@dataclass(frozen=True)
class PlacedStep:
    """A setup step and where it is: ``setup step 2`` or ``postconfig step 1``."""

    place: str  # "setup" or "postconfig"
    number: int  # from 1
    type: str
    parameters: dict[str, Any]

    def name(self) -> str:
        return f"{self.place} step {self.number} ({self.type})"


@dataclass(frozen=True)
class PlacedGetter:
    """An evaluator getter and where it is: ``result``, ``expected[1]``."""

    place: str
    type: str
    config: dict[str, Any]


def task_steps(setup: Any, evaluator: Any) -> Iterator[PlacedStep]:
    """Every well-formed step of the setup, then of the evaluator's postconfig."""
    postconfig = evaluator.get("postconfig", []) if isinstance(evaluator, dict) else []
    for place, steps in (("setup", setup), ("postconfig", postconfig)):
        if not isinstance(steps, list):
            continue
        for number, step in enumerate(steps, start=1):
            if isinstance(step, dict) and isinstance(step.get("type"), str):
                parameters = step.get("parameters", {})
                yield PlacedStep(
                    place, number, step["type"], parameters if isinstance(parameters, dict) else {}
                )


def evaluator_getters(evaluator: Any) -> Iterator[PlacedGetter]:
    """Every getter of the evaluator's ``result`` and ``expected`` (each one or a list)."""
    if not isinstance(evaluator, dict):
        return
    for key in ("result", "expected"):
        value = evaluator.get(key)
        configs = value if isinstance(value, list) else [value]
        for i, config in enumerate(configs):
            if isinstance(config, dict) and isinstance(config.get("type"), str):
                place = f"{key}[{i}]" if isinstance(value, list) else key
                yield PlacedGetter(place, config["type"], config)


def _urls(value: Any) -> list[str]:
    candidates = value if isinstance(value, list) else [value]
    return [
        url
        for url in candidates
        if isinstance(url, str) and url.startswith(("http://", "https://"))
    ]


def task_file_urls(setup: list[Any], evaluator: dict[str, Any]) -> list[str]:
    """Every URL the task takes from the cache, each once, in the order the task names them."""
    urls: list[str] = []
    for step in task_steps(setup, evaluator):
        if step.type == "download":
            files = step.parameters.get("files")
            for item in files if isinstance(files, list) else []:
                if isinstance(item, dict):
                    urls += _urls(item.get("url"))
        elif step.type == "update_browse_history":
            urls.append(EMPTY_CHROME_HISTORY_URL)
    for getter in evaluator_getters(evaluator):
        if getter.type in FILE_GETTERS:
            urls += _urls(getter.config.get("path"))
    return list(dict.fromkeys(urls))


def missing_urls(urls: Iterable[str]) -> set[str]:
    """Those of ``urls`` the cache holds no file for, in one query."""
    by_key = {url_key(url): url for url in urls}
    if not by_key:
        return set()
    kept = set(
        TaskFile.objects.filter(url_sha256__in=list(by_key)).values_list("url_sha256", flat=True)
    )
    return {url for key, url in by_key.items() if key not in kept}
