"""Users and their personal access tokens."""

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone


class User(AbstractUser):
    """A person using Tandem. Roles come from project memberships; see ``roles.py``."""

    can_create_projects = models.BooleanField(
        default=False,
        help_text="Project manager: may create projects (and becomes their manager).",
    )


class AccessToken(models.Model):
    """A personal access token for the API, stored as a SHA-256 hash of its secret.

    The clear token (``tdm_<prefix>_<secret>``) is shown once, when it is created. The prefix
    is kept in clear so a token can be found by it and recognised in lists.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = ArrayField(models.CharField(max_length=32), default=list)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} (tdm_{self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()
