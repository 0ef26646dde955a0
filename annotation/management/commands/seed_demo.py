"""Seeds the demo projects with tasks and one user per role, and prints the logins.

"Demo: desktop basics" runs on local sandboxed desktops, with no network: its browser task's page
comes with the task (``annotation.demo.basics``), and the tasks that leave a result behind are
scored by OSWorld-style evaluators when an episode ends. "Demo: OSWorld tasks" holds six of
OSWorld's published tasks, as published, on container desktops (the applications are in the
desktop image), with their files made locally and kept in the task-file cache
(``annotation.demo.osworld``), so that their setups and evaluators run with no internet.

Idempotent: running it again keeps what exists (and resets the demo users' passwords).
"""

import json
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from annotation.demo import basics as demo_basics
from annotation.demo import osworld as demo_osworld
from annotation.models import Membership, Project, TaskStatus
from annotation.projects import importer
from backend.accounts.models import User
from backend.accounts.roles import Role
from model_serving.demo_version import register_demo_base
from vm_pool.models import DesktopTemplate

DEMO_PASSWORD = "tandem-demo"
DEMO_USERS = [
    # username, role in the demo project (None: platform admin), full name
    ("admin", None, "Ada Admin"),
    ("manager", Role.MANAGER, "Mona Manager"),
    ("annotator", Role.ANNOTATOR, "Ann Annotator"),
    ("annotator2", Role.ANNOTATOR, "Arne Annotator"),
    ("reviewer", Role.REVIEWER, "Rita Reviewer"),
    ("engineer", Role.ENGINEER, "Emil Engineer"),
]


def file_holds(path: str, text: str) -> dict[str, Any]:
    """An OSWorld evaluator: the desktop's file at ``path`` holds ``text``."""
    return {
        "func": "file_contains",
        "result": {"type": "vm_file", "path": path, "dest": path.rsplit("/", 1)[-1]},
        "expected": {"type": "rule", "rules": {"expected": [text]}},
    }


DEMO_TASKS: list[dict[str, Any]] = [
    {
        "id": "demo-text-editor",
        "instruction": (
            "Open the text editor, write 'Hello from Tandem' and save the file as "
            "hello.txt in the home folder."
        ),
        "config": [{"type": "launch", "parameters": {"command": ["mousepad"]}}],
        "related_apps": ["mousepad"],
        "priority": 10,
        "evaluator": file_holds("/home/user/hello.txt", "Hello from Tandem"),
    },
    {
        # What the terminal showed is gone when the episode ends: a review judges this one.
        "id": "demo-terminal",
        "instruction": "In the terminal, list the files of the home folder sorted by size.",
        "config": [{"type": "launch", "parameters": {"command": ["xterm"]}}],
        "related_apps": ["xterm"],
        "priority": 5,
    },
    {
        "id": "demo-browser",
        "instruction": (
            "The browser shows the Riverside Library's web page, and a text editor is open "
            "behind it. Copy the page's title into the text editor and save the file as "
            "title.txt in the home folder."
        ),
        "config": [
            {"type": "launch", "parameters": {"command": ["mousepad"]}},
            *demo_basics.library_setup(),
        ],
        "related_apps": ["chromium", "mousepad"],
        "evaluator": file_holds("/home/user/title.txt", demo_basics.LIBRARY_TITLE),
    },
    {
        "id": "demo-files",
        "instruction": "Create a folder 'reports' in the home folder and move notes.txt into it.",
        "config": [
            {
                "type": "execute",
                "parameters": {"command": ["bash", "-c", "echo notes > ~/notes.txt"]},
            },
            {"type": "launch", "parameters": {"command": ["pcmanfm"]}},
        ],
        "related_apps": ["pcmanfm"],
        "evaluator": {
            "func": "check_include_exclude",
            "result": {
                "type": "vm_command_line",
                "command": (
                    "if [ -f ~/reports/notes.txt ] && [ ! -e ~/notes.txt ]; "
                    "then echo 'notes.txt is in reports'; else echo 'notes.txt was not moved'; fi"
                ),
                "shell": True,
            },
            "expected": {
                "type": "rule",
                "rules": {"include": ["notes.txt is in reports"], "exclude": ["not moved"]},
            },
        },
    },
]


def import_demo_tasks(project: Project, manager: User) -> int:
    """Import the demo's tasks but those someone has started, which keep the content they were
    worked with (the importer refuses to change a started task): seeding an older demo again
    brings its other tasks up to date. Returns how many tasks are new."""
    started = set(
        project.tasks.exclude(status__in=(TaskStatus.QUEUED, TaskStatus.ASSIGNED)).values_list(
            "external_id", flat=True
        )
    )
    rows = [task for task in DEMO_TASKS if task["id"] not in started]
    if not rows:
        return 0
    data = "\n".join(json.dumps(task) for task in rows).encode()
    return len(importer.import_tasks(project, data, "demo.jsonl", manager).created)


OSWORLD_PROJECT = "Demo: OSWorld tasks"
OSWORLD_TEMPLATE = "osworld"


class Command(BaseCommand):
    help = "Create the demo project, its tasks and one user per role; print the logins."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        users = {}
        for username, role, full_name in DEMO_USERS:
            first, last = full_name.split(" ", 1)
            user, _ = User.objects.get_or_create(
                username=username, defaults={"first_name": first, "last_name": last}
            )
            user.set_password(DEMO_PASSWORD)
            # What a demo user may do comes from their role alone: staff is the admin's only.
            user.is_superuser = user.is_staff = role is None
            user.can_create_projects = role == Role.MANAGER
            user.save()
            users[username] = (user, role)

        project, _ = Project.objects.get_or_create(
            name="Demo: desktop basics",
            defaults={
                "description": "Everyday desktop tasks to try the annotation loop.",
                "guidelines": "Approve a step when it is what you would do; correct it otherwise.",
                "created_by": users["manager"][0],
            },
        )
        for user, role in users.values():
            if role is not None:
                Membership.objects.update_or_create(
                    project=project, user=user, defaults={"role": role}
                )
        DesktopTemplate.objects.get_or_create(
            name=project.environment_template,
            defaults={"width": 1280, "height": 800, "min_ready": 2, "max_desktops": 6},
        )
        created = import_demo_tasks(project, users["manager"][0])
        self.stdout.write(
            f"Demo project '{project.name}': {created} new task(s), {project.tasks.count()} in all."
        )
        self._osworld(users)
        self.stdout.write(register_demo_base())
        self.stdout.write(f"Logins (password for all: {DEMO_PASSWORD}):")
        for username, role, _ in DEMO_USERS:
            self.stdout.write(f"  {username:<11} {role.value if role else 'admin (superuser)'}")

    def _osworld(self, users: dict[str, tuple[User, Role | None]]) -> None:
        manager = users["manager"][0]
        project, _ = Project.objects.get_or_create(
            name=OSWORLD_PROJECT,
            defaults={
                "description": "Six of OSWorld's published tasks (Calc, Writer, Impress, GIMP, "
                "Chrome, OS), scored by their own evaluators when an episode ends.",
                "guidelines": "Solve the task as a person would; the evaluator scores the result.",
                "created_by": manager,
                "environment_template": OSWORLD_TEMPLATE,
            },
        )
        for user, role in users.values():
            if role is not None:
                Membership.objects.update_or_create(
                    project=project, user=user, defaults={"role": role}
                )
        # OSWorld's screen size; its applications are in the desktop image (make desktop-image).
        DesktopTemplate.objects.get_or_create(
            name=OSWORLD_TEMPLATE,
            defaults={
                "provider": "docker",
                "width": 1920,
                "height": 1080,
                "min_ready": 1,
                "max_desktops": 3,
            },
        )
        files = demo_osworld.fill_cache(manager)
        data = "\n".join(json.dumps(task) for task in demo_osworld.task_rows()).encode()
        report = importer.import_tasks(project, data, "osworld-demo.jsonl", manager)
        self.stdout.write(
            f"Demo project '{project.name}': {len(report.created)} new task(s), "
            f"{project.tasks.count()} in all, {files} task files kept for them."
        )
