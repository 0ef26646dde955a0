"""Stops every desktop this host runs (``make stop`` calls it)."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus


class Command(BaseCommand):
    help = "Stop every desktop of this host (TANDEM_HOST) and free its display."

    def handle(self, *args: Any, **options: Any) -> None:
        ids = list(
            Desktop.objects.filter(host=settings.TANDEM_HOST)
            .exclude(status=DesktopStatus.STOPPED)
            .values_list("pk", flat=True)
        )
        for desktop_id in ids:
            pool.stop_desktop(desktop_id, reason="host stopped")
        self.stdout.write(f"stopped {len(ids)} desktop(s) on {settings.TANDEM_HOST}")
