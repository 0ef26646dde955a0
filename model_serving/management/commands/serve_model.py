"""Starts vLLM serving UI-TARS on this machine, with the flags of ``model_serving.vllm``.

It prints the command first; ``--dry-run`` only prints it. ``--model-version NAME`` adds the
adapter of a registered model version, loaded at start (``--lora-modules``). The command
replaces this process (``exec``), so vLLM receives the signals a supervisor sends.
"""

import os
import shutil
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from model_serving.vllm import DEFAULT_MODEL, serve_command


class Command(BaseCommand):
    help = "Serve a UI-TARS model with vLLM's OpenAI-compatible server (prints the command)."
    # A launcher: the platform's checks say nothing about whether vLLM can start.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", default=DEFAULT_MODEL, help="Hugging Face id or path")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--served-name", help="the name clients ask for (default: the model id)"
        )
        parser.add_argument(
            "--model-version",
            action="append",
            default=[],
            metavar="NAME",
            help="a registered model version whose adapter is loaded at start (repeatable): "
            "its files are copied to TANDEM_ADAPTER_DIR and it is served under its name",
        )
        parser.add_argument("--dry-run", action="store_true", help="only print the command")

    def handle(self, *args: Any, **options: Any) -> None:
        command = serve_command(
            options["model"],
            port=options["port"],
            served_name=options["served_name"],
            lora_modules=self._adapters(options["model_version"], options["dry_run"]),
        )
        self.stdout.write(command.shell())
        if options["dry_run"]:
            return
        vllm = shutil.which(command.argv[0])
        if vllm is None:
            raise CommandError(
                "vllm is not installed here. Install vLLM on a machine with an NVIDIA GPU "
                "(pip install vllm) and run this command there, or start the compose service: "
                "docker compose --profile gpu up -d vllm"
            )
        self.stdout.flush()
        os.execve(vllm, command.argv, {**os.environ, **command.env})

    def _adapters(self, names: list[str], dry_run: bool) -> dict[str, str]:
        from model_serving.models import ModelVersion  # here: after Django's setup
        from model_serving.serving import (  # here: after Django's setup
            adapter_paths,
            materialize_adapter,
        )

        modules = {}
        for name in names:
            version = ModelVersion.objects.filter(name=name).first()
            if version is None:
                raise CommandError(f"no model version named {name!r}")
            if not version.adapter_location:
                raise CommandError(f"model version {name} has no adapter: serve its base model")
            path = adapter_paths(version)[1] if dry_run else materialize_adapter(version)
            modules[version.name] = path
        return modules
