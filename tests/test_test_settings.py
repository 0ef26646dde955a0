"""The test run's own settings are in effect, in every process of a parallel run."""

import os
import sys

from django.conf import settings

from backend.celery import app


def test_each_process_of_a_parallel_run_is_an_instance_of_its_own():
    """Two processes sharing a Redis prefix take each other's jobs (a proposal for a step of
    the other process's database), and sharing a media folder, each other's files."""
    assert "tests.settings" in sys.modules  # read in place of Tandem's own
    process = os.environ.get("PYTEST_XDIST_WORKER")
    if process:
        instance = f"test_tandem_{process}"
        assert instance == settings.TANDEM_INSTANCE
        assert f"{instance}:" == app.conf.broker_transport_options["global_keyprefix"]
        assert settings.MEDIA_ROOT.name.endswith(f"-{process}")
        assert settings.TANDEM_HOST.endswith(f"-{process}")
