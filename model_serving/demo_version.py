"""The demo's base model as a model version: registered on the demo endpoint and checked there.

``seed_demo`` calls ``register_demo_base`` after ``make demo`` saved the tiny base model
(``manage.py demo_model``) and started the demo endpoint (``manage.py demo_endpoint``). The
version is the base itself (no adapter), so a manager can choose it as a project's version A and
the fine-tuning form offers its endpoint for the versions trained from it. It never becomes a
project's version by itself: the demo projects keep the CPU baseline until someone chooses.
"""

from django.conf import settings

from model_serving.models import ModelVersion
from model_serving.serving import ServingFailed, serve_version

DEMO_LINEAGE = {"demo": "tiny random Qwen2.5-VL; the demo endpoint's answers are scripted"}


def register_demo_base() -> str:
    """Register (once) and serve the demo base version; a line that says how it went."""
    folder = settings.TANDEM_DEMO_MODEL_DIR
    name = settings.TANDEM_DEMO_BASE_MODEL
    if not (folder / "config.json").exists():
        return f"No demo base model in {folder} (manage.py demo_model makes it)."
    version, _ = ModelVersion.objects.get_or_create(
        name=name,
        defaults={
            "base_model": name,
            "base_model_path": str(folder),
            "base_url": settings.TANDEM_DEMO_ENDPOINT,
            "lineage": DEMO_LINEAGE,
        },
    )
    try:
        serve_version(version)
    except ServingFailed as error:
        return f"Demo model version {name}: not served yet ({error})."
    return f"Demo model version {name}: served by the demo endpoint {version.base_url}."
