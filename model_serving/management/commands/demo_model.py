"""Saves the demo's base model (a tiny Qwen2.5-VL, ``model_serving.demo_model``) into
``TANDEM_DEMO_MODEL_DIR``, once; prints the ``TANDEM_BASE_MODELS`` entry that names it.

Without the training libraries (torch, transformers) it says so and does nothing: fine-tuning
then needs a worker that has them.
"""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Save the demo's tiny base model (CPU, no download) and print its base-model entry."

    def handle(self, *args: Any, **options: Any) -> None:
        folder = settings.TANDEM_DEMO_MODEL_DIR
        try:
            from model_serving.demo_model import save_demo_base  # weight: torch, maybe absent
        except ImportError as error:
            self.stdout.write(f"no demo base model: the training libraries are missing ({error})")
            return
        made = not (folder / "config.json").exists()
        save_demo_base(folder)
        self.stdout.write(
            f"{'saved' if made else 'kept'} the demo base model in {folder}: "
            f"TANDEM_BASE_MODELS={settings.TANDEM_DEMO_BASE_MODEL}={folder}"
        )
