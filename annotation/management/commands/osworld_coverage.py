"""Prints how much of an OSWorld task set Tandem runs and scores (``annotation.projects.coverage``).

    manage.py osworld_coverage FOLDER [--all] [--format text|markdown|json]

FOLDER is OSWorld's ``evaluation_examples`` (the tasks ``test_all.json`` publishes; ``--all``
for every file under ``examples/``) or any folder of ``*.json`` task files, each file's folder
naming its domain.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.projects.coverage import CoverageError, coverage, render


class Command(BaseCommand):
    help = "Count, per domain, the OSWorld tasks whose setup, getters and metrics Tandem supports."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path, help="evaluation_examples, or a folder of tasks")
        parser.add_argument(
            "--all",
            action="store_true",
            help="with evaluation_examples: every file under examples/, not just test_all.json's",
        )
        parser.add_argument("--format", choices=["text", "markdown", "json"], default="text")

    def handle(self, *args: object, **options: object) -> None:
        folder = options["folder"]
        assert isinstance(folder, Path)
        try:
            report = coverage(folder, every_file=bool(options["all"]))
        except CoverageError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(render(report, str(options["format"])), ending="")
