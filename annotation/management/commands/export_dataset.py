"""Creates a dataset export, follows it with a progress bar and downloads its files.

    manage.py export_dataset --user ENGINEER --project 3 --kind dpo [--format trl] \\
        [--date-from 2026-01-01] [--date-to 2026-02-01] [--model-version V] \\
        [--review-status accepted] [--annotator ann] [--include-accepted] \\
        [--exclude-held-out] --out ./data

The export is queued on the exports queue like one made through the API (same checks, same
permissions of the user named); this command watches its row, then copies every file from
storage into ``--out`` (keeping ``data/…`` and ``images/…`` folders) and checks each against
its sha256. Ctrl-C stops watching and leaves the export running; ``--cancel-on-interrupt``
cancels it instead.
"""

import hashlib
import time
from pathlib import Path
from typing import Any

from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.http import Http404
from rest_framework.exceptions import APIException

from annotation.datasets import exports
from annotation.datasets.api import ExportFiltersSerializer
from annotation.models import DatasetExport
from annotation.projects import access
from backend.accounts.models import User
from backend.accounts.roles import Capability
from backend.errors import DomainError

BAR = 30


class Command(BaseCommand):
    help = "Export a dataset (a job on the exports queue), watch it and download its files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="the engineer the export is made by")
        parser.add_argument("--project", type=int, required=True)
        parser.add_argument("--kind", required=True, help="sft, dpo or ct")
        parser.add_argument("--format", default="trl", help="trl or llama_factory")
        parser.add_argument("--date-from", default=None)
        parser.add_argument("--date-to", default=None)
        parser.add_argument("--model-version", default=None)
        parser.add_argument("--review-status", default="any")
        parser.add_argument("--annotator", default=None)
        parser.add_argument("--include-accepted", action="store_true")
        parser.add_argument(
            "--exclude-held-out", action="store_true", help="leave out the evaluation split"
        )
        parser.add_argument("--out", required=True, help="folder the files are written to")
        parser.add_argument("--poll", type=float, default=0.5, help="seconds between looks")
        parser.add_argument("--cancel-on-interrupt", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        given = {
            "date_from": options["date_from"],
            "date_to": options["date_to"],
            "model_version": options["model_version"],
            "review_status": options["review_status"],
            "annotator": options["annotator"],
            "include_accepted": options["include_accepted"],
            "exclude_held_out": options["exclude_held_out"],
        }
        filters = ExportFiltersSerializer(data=given)
        if not filters.is_valid():
            raise CommandError(f"bad filters: {dict(filters.errors)}")
        project = access.visible_projects(user).filter(pk=options["project"]).first()
        if project is None:
            raise CommandError(f"{user.username} has no project {options['project']}")
        try:
            access.require(user, project, Capability.MANAGE_DATASETS)
            export = exports.create_export(
                project,
                user,
                options["kind"],
                options["format"],
                exports.ExportFilters(**filters.validated_data),
            )
        except (DomainError, APIException, Http404) as error:
            raise CommandError(f"cannot create the export: {error}") from None
        self.stdout.write(f"export {export.pk} queued on the exports queue")
        try:
            export = self._watch(export.pk, options["poll"])
        except KeyboardInterrupt:
            if options["cancel_on_interrupt"]:
                exports.cancel_export(export.pk)
                self.stdout.write(f"\ncancelled export {export.pk}")
            else:
                self.stdout.write(f"\nstopped watching; export {export.pk} goes on")
            return
        if export.status != DatasetExport.Status.SUCCEEDED:
            raise CommandError(f"export {export.pk} {export.status}: {export.error}")
        self._download(export, Path(options["out"]))

    def _watch(self, export_id: int, poll: float) -> DatasetExport:
        while True:
            export = DatasetExport.objects.get(pk=export_id)
            filled = round(export.progress * BAR)
            bar = "#" * filled + "." * (BAR - filled)
            self.stdout.write(f"\r[{bar}] {export.progress:4.0%} {export.status}", ending="")
            self.stdout.flush()
            if export.status in exports.FINISHED:
                self.stdout.write("")
                return export
            time.sleep(poll)

    def _download(self, export: DatasetExport, out: Path) -> None:
        for entry in export.files:
            target = out / entry["name"]
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with (
                default_storage.open(exports.export_prefix(export.pk) + entry["name"]) as source,
                target.open("wb") as sink,
            ):
                for block in iter(lambda: source.read(1024 * 1024), b""):
                    digest.update(block)
                    sink.write(block)
            if digest.hexdigest() != entry["sha256"]:
                raise CommandError(f"{entry['name']} does not match its sha256; download again")
        samples = export.counts.get("samples", 0)
        self.stdout.write(
            f"{samples} samples in {len(export.files)} files written to {out} "
            f"(dataset {export.content_hash[:12]})"
        )
