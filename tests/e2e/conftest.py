"""Fixtures of the browser tests."""

import uuid

import pytest

from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus


@pytest.fixture
def host(settings):
    """A desktop host of the test's own; every desktop it started is stopped afterwards."""
    settings.TANDEM_HOST = f"e2e-{uuid.uuid4().hex[:8]}"
    yield settings.TANDEM_HOST
    for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
        pool.stop_desktop(desktop.pk)
