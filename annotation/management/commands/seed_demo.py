"""Seeds the demo projects with tasks and one user per role, and prints the logins.

"Demo: desktop basics" runs on local sandboxed desktops; "Demo: OSWorld tasks" holds six of
OSWorld's published tasks, as published, on container desktops (the applications are in the
desktop image), with their files made locally and kept in the task-file cache
(``annotation.demo_osworld``), so that their setups and evaluators run with no internet.

Idempotent: running it again keeps what exists (and resets the demo users' passwords).
"""

import json
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from annotation import demo_osworld, importer
from annotation.models import Membership, Project
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
DEMO_TASKS = [
    {
        "id": "demo-text-editor",
        "instruction": (
            "Open the text editor, write 'Hello from Tandem' and save the file as "
            "hello.txt in the home folder."
        ),
        "config": [{"type": "launch", "parameters": {"command": ["mousepad"]}}],
        "related_apps": ["mousepad"],
        "priority": 10,
    },
    {
        "id": "demo-terminal",
        "instruction": "In the terminal, list the files of the home folder sorted by size.",
        "config": [{"type": "launch", "parameters": {"command": ["xterm"]}}],
        "related_apps": ["xterm"],
        "priority": 5,
    },
    {
        "id": "demo-browser",
        "instruction": "Open example.com in the browser and copy its title into a new text file.",
        "config": [
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["http://example.com"]}}
        ],
        "related_apps": ["chromium", "mousepad"],
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
    },
]


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
        data = "\n".join(json.dumps(task) for task in DEMO_TASKS).encode()
        report = importer.import_tasks(project, data, "demo.jsonl", users["manager"][0])
        self.stdout.write(
            f"Demo project '{project.name}': {len(report.created)} new task(s), "
            f"{project.tasks.count()} in all."
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
