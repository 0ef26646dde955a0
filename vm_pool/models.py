"""What PostgreSQL knows about the environment: stored screenshots (desktops come with the pool)."""

from django.db import models
from django.utils import timezone


class Screenshot(models.Model):
    """A lossless PNG observation, stored once under its SHA-256 through Django's storage API."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    size_bytes = models.PositiveIntegerField()
    file = models.FileField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} {self.width}×{self.height}"
