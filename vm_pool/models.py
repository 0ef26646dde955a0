"""What PostgreSQL knows about the environment: desktops, their templates, streams, screenshots,
task files and the jobs that store archives of them."""

from django.conf import settings
from django.db import models
from django.db.models import Q
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


class DesktopTemplate(models.Model):
    """What a desktop looks like when it is fresh, and how many to keep ready."""

    name = models.CharField(max_length=100, unique=True)
    provider = models.CharField(
        max_length=32, default="local", help_text="A key of TANDEM_DESKTOP_PROVIDERS."
    )
    width = models.PositiveIntegerField(default=1280)
    height = models.PositiveIntegerField(default=800)
    home_template = models.CharField(
        max_length=500,
        blank=True,
        help_text="Directory copied into HOME at every reset (empty: the built-in one).",
    )
    autostart = models.JSONField(
        default=list, blank=True, help_text="Commands started on every fresh desktop: [[argv…]]."
    )
    image = models.CharField(
        max_length=300, blank=True, help_text="Container image or machine image (docker, aws)."
    )
    internet = models.BooleanField(
        default=False,
        help_text="Programs on these desktops may reach the internet (never the platform, the "
        "host or private networks); without it a desktop has no network at all.",
    )
    min_ready = models.PositiveIntegerField(default=1)
    max_desktops = models.PositiveIntegerField(default=4)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.width}×{self.height}, {self.provider})"


class DesktopStatus(models.TextChoices):
    STARTING = "starting"
    READY = "ready"
    LEASED = "leased"
    RESETTING = "resetting"
    BROKEN = "broken"
    STOPPED = "stopped"


# Desktops in these states hold their display and ports.
LIVE_STATUSES = [s.value for s in DesktopStatus if s != DesktopStatus.STOPPED]


class Desktop(models.Model):
    """One desktop on one host. PostgreSQL is the truth about every desktop.

    ``generation`` grows at every reset: streaming tokens and leases name the generation they
    were issued for, so nothing from before a reset reaches the fresh desktop.
    """

    template = models.ForeignKey(DesktopTemplate, on_delete=models.PROTECT, related_name="desktops")
    host = models.CharField(max_length=200, help_text="The host that owns this desktop.")
    provider = models.CharField(max_length=32)
    status = models.CharField(
        max_length=16, choices=DesktopStatus.choices, default=DesktopStatus.STARTING
    )
    generation = models.PositiveIntegerField(default=0)
    display = models.PositiveIntegerField(null=True, blank=True)
    vnc_host = models.CharField(max_length=200, default="127.0.0.1")
    vnc_port = models.PositiveIntegerField(null=True, blank=True)
    vnc_socket = models.CharField(
        max_length=300,
        blank=True,
        help_text="The view-only VNC server's unix socket on the host (local desktops).",
    )
    control_address = models.CharField(max_length=300, blank=True)
    instance_id = models.CharField(
        max_length=200, blank=True, help_text="Process group, container id or instance id."
    )
    agent_key = models.CharField(max_length=64, blank=True)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    leased_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="leased_desktops",
    )
    lease_ref = models.CharField(
        max_length=200, blank=True, help_text="What the lease is for, e.g. 'task:12'."
    )
    leased_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    broken_reason = models.CharField(max_length=500, blank=True)
    health_failures = models.PositiveIntegerField(default=0)
    last_health_at = models.DateTimeField(null=True, blank=True)
    state_changed_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "display"],
                condition=Q(status__in=LIVE_STATUSES),
                name="desktop_display_unique_on_host",
            ),
            models.UniqueConstraint(
                fields=["host", "vnc_port"],
                condition=Q(status__in=LIVE_STATUSES),
                name="desktop_vnc_port_unique_on_host",
            ),
            models.CheckConstraint(
                condition=~Q(status="leased")
                | (Q(leased_by__isnull=False) & Q(lease_expires_at__isnull=False)),
                name="desktop_leased_has_holder",
            ),
        ]
        indexes = [
            models.Index(
                fields=["template", "state_changed_at"],
                condition=Q(status="ready"),
                name="desktop_ready_pool",
            ),
            models.Index(fields=["host", "status"], name="desktop_host_status"),
        ]

    def __str__(self) -> str:
        where = f":{self.display}" if self.display is not None else self.instance_id
        return f"desktop {self.pk} {where} on {self.host} ({self.status})"


class Recording(models.Model):
    """A person driving one desktop through a control stream: the recording gate writes each
    of their inputs here before the desktop gets it (``vm_pool.recording.gate``).

    It belongs to one lease of one desktop generation; input passes only while it is open
    (``ended_at`` empty), the desktop is leased to its user under ``lease_ref`` and the lease has
    not lapsed. What it is for is the caller's (an episode's demonstration, say).
    """

    desktop = models.ForeignKey(
        Desktop, null=True, on_delete=models.SET_NULL, related_name="recordings"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    generation = models.PositiveIntegerField()
    lease_ref = models.CharField(max_length=64)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Why the gate stopped passing input before the recording was ended, if it did: a write
    # that failed, input over its rate, a clipboard over its size, a lease that lapsed.
    refusals = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"recording {self.pk} of desktop {self.desktop_id} by {self.user_id}"


class InputKind(models.TextChoices):
    POINTER = "pointer"
    KEY = "key"
    CLIPBOARD = "clipboard"


class RecordedInput(models.Model):
    """One input as the person's client sent it (RFB PointerEvent, KeyEvent, ClientCutText),
    written before the desktop got it; ``frame`` is the screen just before it, grabbed for an
    input that may begin an action."""

    recording = models.ForeignKey(Recording, on_delete=models.CASCADE, related_name="inputs")
    index = models.PositiveIntegerField()
    at = models.FloatField(help_text="Seconds since the recording started, as the input came.")
    kind = models.CharField(max_length=16, choices=InputKind.choices)
    x = models.IntegerField(null=True, blank=True)
    y = models.IntegerField(null=True, blank=True)
    buttons = models.PositiveSmallIntegerField(null=True, blank=True)
    keysym = models.BigIntegerField(null=True, blank=True)
    down = models.BooleanField(null=True, blank=True)
    text = models.TextField(blank=True)
    frame = models.ForeignKey(
        Screenshot, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["recording", "index"]
        constraints = [
            models.UniqueConstraint(fields=["recording", "index"], name="recorded_input_unique")
        ]

    def __str__(self) -> str:
        return f"input {self.index} of recording {self.recording_id}"


class StreamToken(models.Model):
    """A short-lived ticket that lets one user open one VNC stream of one desktop generation;
    a control stream's also names the recording its input goes through."""

    token_hash = models.CharField(max_length=64, unique=True)
    desktop = models.ForeignKey(Desktop, on_delete=models.CASCADE, related_name="stream_tokens")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    generation = models.PositiveIntegerField()
    view_only = models.BooleanField(default=True)
    recording = models.ForeignKey(
        Recording, null=True, blank=True, on_delete=models.CASCADE, related_name="tokens"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(view_only=True, recording__isnull=True)
                | Q(view_only=False, recording__isnull=False),
                name="stream_control_is_recorded",
            )
        ]

    def __str__(self) -> str:
        mode = "view-only" if self.view_only else "control"
        return f"{mode} stream of desktop {self.desktop_id} for {self.user_id}"


class DesktopHost(models.Model):
    """A machine whose Celery worker owns desktops (queue ``desktops.<name>``)."""

    name = models.CharField(max_length=200, unique=True)
    providers = models.JSONField(default=list, help_text="Providers this host can run.")
    last_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        return host_queue(self.name)


def host_queue(host: str) -> str:
    return f"desktops.{host}"


def rollout_queue(host: str) -> str:
    """The queue of a host's rollouts: each runs to its end in one job, and a host's rollout
    workers (processes of their own, as many as it has cores) share them out, where one process
    would run them all under one interpreter lock."""
    return f"rollouts.{host}"


class TaskFile(models.Model):
    """A file a task's setup downloads, kept by URL so that it is fetched once.

    The content is stored once per SHA-256, at ``task-files/<sha256>``, through Django's storage
    API. A manager may upload it for a URL instead, where the platform cannot reach the URL.
    """

    class Source(models.TextChoices):
        FETCHED = "fetched"
        UPLOADED = "uploaded"

    url = models.TextField()
    url_sha256 = models.CharField(
        max_length=64, unique=True, help_text="SHA-256 of the URL: the lookup key."
    )
    sha256 = models.CharField(max_length=64, db_index=True, help_text="SHA-256 of the content.")
    size_bytes = models.PositiveBigIntegerField()
    file = models.FileField(max_length=200)
    source = models.CharField(max_length=16, choices=Source.choices)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.url} ({self.size_bytes} bytes, {self.source})"


class TaskFileArchive(models.Model):
    """A large archive of task files, checked and stored by a background job
    (``vm_pool.task_files.archives``): its progress, then what became of each file, or every
    reason the archive was refused (nothing stored)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    name = models.CharField(max_length=255, blank=True, help_text="The uploaded file's name.")
    file = models.FileField(
        max_length=200, blank=True, help_text="The upload in storage, until the job is done."
    )
    size_bytes = models.PositiveBigIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    counts = models.JSONField(
        default=dict, blank=True, help_text="stored, replaced and unchanged; or problems."
    )
    files = models.JSONField(
        default=list,
        blank=True,
        help_text="Each file's url, path, sha256, size_bytes and result.",
    )
    problems = models.JSONField(
        default=list, blank=True, help_text="Why the archive was refused: [{entry, url, message}]."
    )
    error = models.TextField(blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1),
                name="task_file_archive_progress_0_1",
            )
        ]

    def __str__(self) -> str:
        return f"task-file archive {self.pk} ({self.status})"
