"""What stands between a task and a desktop here, derived from the task's content.

- **Cannot run.** A setup or postconfig step of a type no desktop here runs on principle
  (``vm_pool.setup.runner.NOT_RUNNABLE``: a Google Drive account, a login, OSWorld's paid
  proxies), or an evaluator getter that reads such a service (``NOT_RUNNABLE_GETTERS``), makes
  the task one that cannot run. It is imported and kept, with the reason in
  ``Task.cannot_run``, shown to managers and never claimed nor assigned. The reason is derived:
  the importer sets it from the content at every import, so it follows the registries.
- **Files missing.** The URLs a task takes from the task-file cache
  (``vm_pool.task_files.urls``) that the cache does not hold yet; a manager uploads them (one
  file or an archive) on a platform with no way out. Shown, not enforced: a platform with
  internet fetches them at setup.
- **Not on this desktop.** The programs a task's setup and postconfig start (the first word of
  each ``launch``, ``execute``, ``command`` and ``open``-less command line) that its project's
  desktop does not have. A local desktop runs the host's programs (its system is the host's,
  read-only): a program missing from the host's ``PATH`` will not start, as ``python`` did not
  for OSWorld tasks on a plain desktop. A container or machine desktop brings its own image,
  which the platform cannot look into: nothing is said of it. Shown to managers with the task
  (and at import), so that the project's desktop is chosen before anyone claims the task.
"""

import shlex
import shutil
from collections.abc import Iterable
from typing import Any

from annotation.models import Task
from vm_pool.models import DesktopTemplate
from vm_pool.setup.runner import NOT_RUNNABLE
from vm_pool.task_files.urls import evaluator_getters, missing_urls, task_file_urls, task_steps

# OSWorld's getters that read a third-party service no desktop here has an account for.
NOT_RUNNABLE_GETTERS: dict[str, str] = {
    "googledrive_file": "needs a Google Drive account",
}
REASON_MAX_CHARS = 300
COMMAND_STEPS = ("launch", "execute", "command", "execute_with_verification")
DESKTOP_PATH = "/usr/local/bin:/usr/bin:/bin"  # a local desktop's PATH (vm_pool.sandbox.bubblewrap)
SHELL_WORDS = frozenset({"bash", "sh", "sleep", "cd", "echo", "true", "export"})


def cannot_run_reason(setup: Any, evaluator: Any) -> str:
    """Why a task with this content cannot run here (every reason, one per type), else ""."""
    reasons: dict[str, str] = {}
    for step in task_steps(setup, evaluator):
        if step.type in NOT_RUNNABLE:
            reasons.setdefault(step.type, f"{step.name()} {NOT_RUNNABLE[step.type]}")
    for getter in evaluator_getters(evaluator):
        if getter.type in NOT_RUNNABLE_GETTERS:
            reasons.setdefault(
                getter.type,
                f"evaluator getter {getter.place} ({getter.type}) "
                f"{NOT_RUNNABLE_GETTERS[getter.type]}",
            )
    text = "; ".join(reasons.values())
    return text if len(text) <= REASON_MAX_CHARS else text[: REASON_MAX_CHARS - 1] + "…"


def files_missing(tasks: Iterable[Task]) -> dict[int, list[str]]:
    """Each task's URLs that the task-file cache lacks, for any number of tasks in one query."""
    needed = {task.pk: task_file_urls(task.setup, task.evaluator) for task in tasks}
    missing = missing_urls(url for urls in needed.values() for url in urls)
    return {pk: [url for url in urls if url in missing] for pk, urls in needed.items()}


def programs(setup: Any, evaluator: Any) -> list[str]:
    """The programs a task's steps start, by name, in order (see the module)."""
    found: dict[str, None] = {}
    for step in task_steps(setup, evaluator):
        if step.type not in COMMAND_STEPS:
            continue
        command = step.parameters.get("command")
        try:
            words = shlex.split(command) if isinstance(command, str) else command
        except ValueError:
            continue
        if isinstance(words, list) and words and isinstance(words[0], str):
            name = words[0].rsplit("/", 1)[-1]
            if name and name not in SHELL_WORDS and not name.startswith("$"):
                found.setdefault(name, None)
    return list(found)


def missing_programs(setup: Any, evaluator: Any, template: DesktopTemplate | None) -> list[str]:
    """The programs a task starts that its project's desktop (``template``) lacks."""
    if template is None or template.provider != "local":
        return []
    return [
        name for name in programs(setup, evaluator) if not shutil.which(name, path=DESKTOP_PATH)
    ]
