"""Creates a fine-tuning job from dataset exports and follows it with a progress bar.

    manage.py finetune --user ENGINEER --exports 12 13 --base-model ui-tars-1.5-7b \\
        --version-name ui-tars-ft-1 [--lora '{"r": 16}'] [--hyperparameters '{"epochs": 2}']

The job is queued on the ``train`` queue like one made through the API (same checks, same
permissions of the user named); this command only watches it. Ctrl-C stops watching and
leaves the job running; ``--cancel-on-interrupt`` cancels it instead.
"""

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.http import Http404
from rest_framework.exceptions import APIException

from annotation.flywheel import model_versions
from backend.accounts.models import User
from backend.errors import DomainError
from model_serving import finetune
from model_serving.models import FINAL_STATUSES, FineTuneJob, ModelVersion

BAR = 30


class Command(BaseCommand):
    help = "Fine-tune a model on dataset exports (a job on the train queue) and watch it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="the engineer the job is made by")
        parser.add_argument("--exports", type=int, nargs="+", required=True)
        parser.add_argument("--base-model", default="")
        parser.add_argument("--parent-version", default=None)
        parser.add_argument("--version-name", required=True)
        parser.add_argument("--base-url", default="")
        parser.add_argument("--lora", type=json.loads, default={})
        parser.add_argument("--hyperparameters", type=json.loads, default={})
        parser.add_argument("--no-wait", action="store_true", help="queue it and return")
        parser.add_argument("--poll", type=float, default=1.0, help="seconds between looks")
        parser.add_argument("--cancel-on-interrupt", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        parent = None
        if options["parent_version"]:
            parent = ModelVersion.objects.filter(name=options["parent_version"]).first()
            if parent is None:
                raise CommandError(f"no model version named {options['parent_version']!r}")
        if not options["base_model"] and parent is None:
            raise CommandError("give --base-model or --parent-version")
        try:
            stages, projects = model_versions.training_stages(user, options["exports"])
            job = finetune.create_job(
                stages=stages,
                base_model=options["base_model"],
                version_name=options["version_name"],
                project_ids=projects,
                created_by=user,
                lora=options["lora"],
                hyperparameters=options["hyperparameters"],
                parent_version=parent,
                base_url=options["base_url"],
            )
        except (DomainError, APIException, Http404) as error:
            raise CommandError(f"cannot create the job: {error}") from None
        self.stdout.write(f"fine-tuning job {job.pk} queued on the train queue")
        if options["no_wait"]:
            return
        try:
            job = self._watch(job.pk, options["poll"])
        except KeyboardInterrupt:
            if options["cancel_on_interrupt"]:
                finetune.cancel_job(job.pk)
                self.stdout.write(f"\ncancelling job {job.pk}")
            else:
                self.stdout.write(f"\nstopped watching; job {job.pk} goes on")
            return
        if job.status != "succeeded":
            raise CommandError(f"job {job.pk} {job.status}: {job.error}")
        self.stdout.write(f"registered model version {job.version_name}")

    def _watch(self, job_id: int, poll: float) -> FineTuneJob:
        while True:
            job = FineTuneJob.objects.get(pk=job_id)
            filled = round(job.progress * BAR)
            loss = f" loss {job.loss_curve[-1]['loss']:.4f}" if job.loss_curve else ""
            bar = "#" * filled + "." * (BAR - filled)
            self.stdout.write(f"\r[{bar}] {job.progress:4.0%} {job.status}{loss}", ending="")
            self.stdout.flush()
            if job.status in FINAL_STATUSES:
                self.stdout.write("")
                return job
            time.sleep(poll)
