"""Registers a model version, loads it on its endpoint, or lists the versions.

manage.py model_version register NAME --base-model M --base-url URL [--adapter PREFIX]
manage.py model_version serve NAME      # load it on its endpoint and check it is listed
manage.py model_version list
"""

from typing import Any

from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand, CommandError, CommandParser

from model_serving.models import ModelVersion
from model_serving.serving import ServingFailed, serve_version
from model_serving.versions import is_adapter_name


class Command(BaseCommand):
    help = "Register, serve or list model versions."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        register = actions.add_parser("register", help="register a version made elsewhere")
        register.add_argument("name")
        register.add_argument("--base-model", required=True, help="the base's served name")
        register.add_argument("--base-url", required=True, help="its OpenAI-compatible endpoint")
        register.add_argument("--adapter", default="", help="storage folder of a LoRA adapter")
        register.add_argument("--style", default="uitars15", choices=["uitars15", "relative1000"])
        register.add_argument("--parent", default=None, help="the version it was trained from")
        serve = actions.add_parser("serve", help="load a version on its endpoint")
        serve.add_argument("name")
        actions.add_parser("list", help="list the versions")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['action']}")(options)

    def _register(self, options: dict[str, Any]) -> None:
        if ModelVersion.objects.filter(name=options["name"]).exists():
            raise CommandError(f"a model version named {options['name']!r} exists")
        if options["adapter"] and not is_adapter_name(options["name"]):
            raise CommandError("a version with an adapter is named with letters, digits, . _ -")
        if options["adapter"] and not default_storage.exists(
            f"{options['adapter'].rstrip('/')}/adapter_config.json"
        ):
            raise CommandError(f"no adapter_config.json in storage at {options['adapter']}")
        parent = None
        if options["parent"]:
            parent = ModelVersion.objects.filter(name=options["parent"]).first()
            if parent is None:
                raise CommandError(f"no model version named {options['parent']!r}")
        version = ModelVersion.objects.create(
            name=options["name"],
            base_model=options["base_model"],
            base_url=options["base_url"],
            adapter_location=options["adapter"],
            coordinate_style=options["style"],
            parent=parent,
            lineage={"registered": True},
        )
        self.stdout.write(f"registered model version {version.name} (id {version.pk})")

    def _serve(self, options: dict[str, Any]) -> None:
        version = ModelVersion.objects.filter(name=options["name"]).first()
        if version is None:
            raise CommandError(f"no model version named {options['name']!r}")
        try:
            serve_version(version)
        except ServingFailed as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"{version.name} is served by {version.base_url}")

    def _list(self, options: dict[str, Any]) -> None:
        for version in ModelVersion.objects.order_by("created_at"):
            adapter = version.adapter_location or "(base model)"
            self.stdout.write(
                f"{version.name}\t{version.base_model}\t{adapter}\t{version.serving_status}"
            )
