"""Tandem settings.

Every value comes from an environment variable with a default that works on a developer
machine (PostgreSQL and Redis on 127.0.0.1). Production differences are explicit: with
``TANDEM_DEBUG=0`` the variables in ``PRODUCTION_REQUIRED_ENV`` must be set, or start-up fails.
"""

import os
import re
import socket
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    return env(name, "1" if default else "0").lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(env(name, str(default)))


DEBUG = env_bool("TANDEM_DEBUG", True)

# Variables a deployment must set; docker-compose.yml is checked against this list.
PRODUCTION_REQUIRED_ENV = [
    "TANDEM_SECRET_KEY",
    "TANDEM_ALLOWED_HOSTS",
    "TANDEM_DB_HOST",
    "TANDEM_DB_PASSWORD",
    "TANDEM_REDIS_URL",
]
if not DEBUG:
    missing = [name for name in PRODUCTION_REQUIRED_ENV if not env(name)]
    if missing:
        raise ImproperlyConfigured(f"TANDEM_DEBUG=0 needs these variables: {', '.join(missing)}")

SECRET_KEY = env("TANDEM_SECRET_KEY", "tandem-development-key-not-for-production")
ALLOWED_HOSTS = [
    h for h in env("TANDEM_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h
]
CSRF_TRUSTED_ORIGINS = [o for o in env("TANDEM_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "backend.accounts",
    "vm_pool",
    "model_serving",
    "annotation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "backend.urls"
WSGI_APPLICATION = "backend.wsgi.application"
ASGI_APPLICATION = "backend.asgi.application"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "backend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# PostgreSQL is the only database, tests included. Every process (a web server, a worker) holds
# a pool of at most TANDEM_DB_POOL_MAX connections; a request or job that finds them all busy
# waits for one, up to TANDEM_DB_POOL_TIMEOUT_SECONDS. No load on one process takes more than
# its pool: a deployment uses at most (its processes × TANDEM_DB_POOL_MAX) of the server's
# max_connections.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": env("TANDEM_DB_HOST", "127.0.0.1"),
        "PORT": env("TANDEM_DB_PORT", "5432"),
        "NAME": env("TANDEM_DB_NAME", "tandem"),
        "USER": env("TANDEM_DB_USER", "tandem"),
        "PASSWORD": env("TANDEM_DB_PASSWORD", "tandem"),
        # Connections come from the process's bounded pool and go back to it after each request
        # or job (no persistent connection per thread besides).
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": True,  # a pooled connection is checked as it is taken
        "OPTIONS": {
            "pool": {
                "min_size": 1,
                "max_size": env_int("TANDEM_DB_POOL_MAX", 8),
                "timeout": env_int("TANDEM_DB_POOL_TIMEOUT_SECONDS", 30),
            },
            "application_name": env("TANDEM_DB_APPLICATION_NAME", "tandem"),
        },
        "TEST": {"NAME": env("TANDEM_TEST_DB_NAME", "test_tandem")},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("TANDEM_REDIS_URL", "redis://127.0.0.1:6379/0")

# One Redis may serve several Tandem instances (two checkouts on one machine, a staging beside
# production): each keeps its queues, results and socket groups under its own key prefix, so no
# worker takes another instance's jobs. An instance is its database: the prefix defaults to the
# database's name, which every process of one instance (web, workers, desktop hosts) shares.
TANDEM_INSTANCE = env("TANDEM_INSTANCE", str(DATABASES["default"]["NAME"]))
if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", TANDEM_INSTANCE):
    raise ImproperlyConfigured(
        f"TANDEM_INSTANCE must be 1-64 letters, digits, '_', '.' or '-', not {TANDEM_INSTANCE!r}"
    )
INSTANCE_KEY_PREFIX = f"{TANDEM_INSTANCE}:"

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": f"{INSTANCE_KEY_PREFIX}asgi"},
    }
}

# Celery: Redis is the broker; job state that matters lives in PostgreSQL rows, not in results.
CELERY_BROKER_URL = env("TANDEM_CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = env("TANDEM_CELERY_RESULT_BACKEND", REDIS_URL)
# No job's return value is read, so none is stored (a key in Redis for a day, for every step).
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "annotation.jobs.propose_step": {"queue": "model"},
    "annotation.jobs.draft_thoughts": {"queue": "model"},
    "annotation.jobs.build_export": {"queue": "exports"},
    # Offline evaluation is batch work over recorded steps, like exports.
    "annotation.jobs.evaluate_model_version": {"queue": "exports"},
    "annotation.jobs.*": {"queue": "default"},
    # Archives of task files are batch work too: never on the desktops' queue.
    "vm_pool.jobs.store_task_file_archive": {"queue": "exports"},
    "vm_pool.jobs.*": {"queue": "desktops"},
    # Training runs only on GPU workers, which consume `train` and nothing else.
    "model_serving.jobs.run_finetune_job": {"queue": "train"},
    "model_serving.jobs.*": {"queue": "default"},
}
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A job whose worker died unacknowledged is delivered again after this many seconds; workers
# look for such jobs every few seconds (kombu's own sweep runs only every 100 s).
TANDEM_CELERY_VISIBILITY_TIMEOUT = env_int("TANDEM_CELERY_VISIBILITY_TIMEOUT", 3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": TANDEM_CELERY_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": max(1, min(10, TANDEM_CELERY_VISIBILITY_TIMEOUT // 2)),
    "unacked_restore_throttle": 1,
    "global_keyprefix": INSTANCE_KEY_PREFIX,
}
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"global_keyprefix": INSTANCE_KEY_PREFIX}
CELERY_TIMEZONE = "UTC"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# In development WhiteNoise serves straight from the apps' static folders (no collectstatic).
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
STATIC_ROOT = Path(env("TANDEM_STATIC_ROOT", str(BASE_DIR / "var" / "static")))
# The web app's build (`npm run build` in frontend/, run by deploy/dev.sh install) is served
# under /static/app/; backend.views.web_app serves its index for every route under /app/.
FRONTEND_DIST = Path(env("TANDEM_FRONTEND_DIST", str(BASE_DIR / "frontend" / "dist")))
# Before the first build there is nothing to serve (/app/ answers 503 and says how to build).
STATICFILES_DIRS = [("app", FRONTEND_DIST)] if FRONTEND_DIST.is_dir() else []
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env("TANDEM_MEDIA_ROOT", str(BASE_DIR / "var" / "media")))

# Storage: local files are the default; TANDEM_STORAGE=s3 uses any S3-compatible service.
TANDEM_STORAGE = env("TANDEM_STORAGE", "local")
if TANDEM_STORAGE == "s3":
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env("TANDEM_S3_BUCKET", "tandem"),
            "endpoint_url": env("TANDEM_S3_ENDPOINT_URL") or None,
            "region_name": env("TANDEM_S3_REGION", "us-east-1"),
            "access_key": env("AWS_ACCESS_KEY_ID") or None,
            "secret_key": env("AWS_SECRET_ACCESS_KEY") or None,
            "file_overwrite": False,
            "default_acl": None,
            "querystring_auth": True,
        },
    }
elif TANDEM_STORAGE == "local":
    _default_storage = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
else:
    raise ImproperlyConfigured(f"TANDEM_STORAGE must be 'local' or 's3', not {TANDEM_STORAGE!r}")
STORAGES = {
    "default": _default_storage,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Dataset exports: built in a staging folder on the worker's disk, published to storage under
# exports/<id>/. An attempt silent for TANDEM_EXPORT_STALE_SECONDS is taken over by a new one.
# Remote downloads are presigned URLs valid TANDEM_EXPORT_URL_SECONDS. TANDEM_EXPORT_RECORD_DELAY_MS
# slows each record down, for tests that must catch a job in the middle; 0 in production.
TANDEM_EXPORT_STAGING_ROOT = Path(
    env("TANDEM_EXPORT_STAGING_ROOT", str(BASE_DIR / "var" / "export-staging"))
)
TANDEM_EXPORT_STALE_SECONDS = env_int("TANDEM_EXPORT_STALE_SECONDS", 120)
TANDEM_EXPORT_URL_SECONDS = env_int("TANDEM_EXPORT_URL_SECONDS", 600)
TANDEM_EXPORT_RECORD_DELAY_MS = env_int("TANDEM_EXPORT_RECORD_DELAY_MS", 0)
TANDEM_EXPORT_QUEUE = env("TANDEM_EXPORT_QUEUE", "exports")  # tests run workers on their own

# Request bodies (backend.body_limits, before Django reads them): TANDEM_REQUEST_MAX_BYTES for
# the API in general, task files up to TANDEM_IMPORT_MAX_BYTES, uploaded task-setup files up to
# TANDEM_DOWNLOAD_MAX_BYTES.
TANDEM_REQUEST_MAX_BYTES = env_int("TANDEM_REQUEST_MAX_BYTES", 1024 * 1024)
TANDEM_IMPORT_MAX_BYTES = env_int("TANDEM_IMPORT_MAX_BYTES", 10 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = TANDEM_IMPORT_MAX_BYTES + 64 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# Files a task's setup downloads (vm_pool.task_files.downloads), fetched by the platform: at most
# TANDEM_DOWNLOAD_MAX_BYTES each, within TANDEM_DOWNLOAD_TIMEOUT_SECONDS, never from loopback,
# private or metadata addresses. TANDEM_DOWNLOAD_ALLOWED_HOSTS ("host:port,…") names a
# deployment's own file mirror, which may be on loopback or a private network (never metadata).
TANDEM_DOWNLOAD_MAX_BYTES = env_int("TANDEM_DOWNLOAD_MAX_BYTES", 100 * 1024 * 1024)
TANDEM_DOWNLOAD_TIMEOUT_SECONDS = env_int("TANDEM_DOWNLOAD_TIMEOUT_SECONDS", 60)
TANDEM_DOWNLOAD_ALLOWED_HOSTS = [
    h.strip().lower() for h in env("TANDEM_DOWNLOAD_ALLOWED_HOSTS", "").split(",") if h.strip()
]
# An archive of task files uploaded at once (vm_pool.task_files.archives): the request body and
# the files it holds, unpacked, are each at most this; each file at most TANDEM_DOWNLOAD_MAX_BYTES.
TANDEM_TASK_ARCHIVE_MAX_BYTES = env_int("TANDEM_TASK_ARCHIVE_MAX_BYTES", 1024 * 1024 * 1024)
# At most this many entries; no zip entry, nor a zip's files together, unpacking to more than
# this many times its packed size. An upload over TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES is read by
# a job, not its request; reading stops after the request's or the job's seconds.
TANDEM_TASK_ARCHIVE_MAX_MEMBERS = env_int("TANDEM_TASK_ARCHIVE_MAX_MEMBERS", 5000)
TANDEM_TASK_ARCHIVE_MAX_RATIO = env_int("TANDEM_TASK_ARCHIVE_MAX_RATIO", 200)
TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES = env_int("TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES", 8 * 1024**2)
TANDEM_TASK_ARCHIVE_REQUEST_SECONDS = env_int("TANDEM_TASK_ARCHIVE_REQUEST_SECONDS", 20)
TANDEM_TASK_ARCHIVE_JOB_SECONDS = env_int("TANDEM_TASK_ARCHIVE_JOB_SECONDS", 600)

# The queue: how long a claim holds a task without a heartbeat, and how often lapsed leases
# are returned to the queue.
TANDEM_LEASE_SECONDS = env_int("TANDEM_LEASE_SECONDS", 120)
# An annotator away longer than the lease (no heartbeat) finds the episode paused, desktop and
# task kept, for this long; after it the desktop goes back to the pool and the episode ends.
TANDEM_EPISODE_GRACE_SECONDS = env_int("TANDEM_EPISODE_GRACE_SECONDS", 900)
TANDEM_REAP_INTERVAL_SECONDS = env_int("TANDEM_REAP_INTERVAL_SECONDS", 30)
TANDEM_POOL_INTERVAL_SECONDS = env_int("TANDEM_POOL_INTERVAL_SECONDS", 10)
CELERY_BEAT_SCHEDULE = {
    "return-lapsed-task-leases": {
        "task": "annotation.jobs.return_lapsed_leases",
        "schedule": float(TANDEM_REAP_INTERVAL_SECONDS),
    },
    "desktop-health-and-lapsed-leases": {
        "task": "vm_pool.jobs.check_all_hosts",
        "schedule": float(TANDEM_POOL_INTERVAL_SECONDS),
    },
    "desktop-pool-maintenance": {
        "task": "vm_pool.jobs.maintain_all_hosts",
        "schedule": float(TANDEM_POOL_INTERVAL_SECONDS),
    },
    # Rollout batches start what they may when desktops come back, and recover lost workers.
    "rollout-dispatch": {"task": "annotation.jobs.dispatch_rollouts", "schedule": 5.0},
}

# Desktops: providers by dotted path; this host's name (its worker consumes the queue
# "desktops.<host>"); where local desktops keep their HOME and logs; the ranges the pool
# allocates X displays and ports from.
TANDEM_DESKTOP_PROVIDERS = {
    "local": "vm_pool.providers.local.LocalProvider",
    "docker": "vm_pool.providers.docker.DockerProvider",
    "aws": "vm_pool.providers.aws.AwsProvider",
}
TANDEM_HOST = env("TANDEM_HOST", socket.gethostname())
# Who may see a desktop and its stream: a rule over projects, which the pool does not know.
TANDEM_DESKTOP_VISIBILITY = "annotation.projects.access.visible_desktops"
TANDEM_HOST_PROVIDERS = [p for p in env("TANDEM_HOST_PROVIDERS", "local").split(",") if p]
TANDEM_DESKTOP_ROOT = Path(env("TANDEM_DESKTOP_ROOT", str(BASE_DIR / "var" / "desktops")))
TANDEM_DISPLAY_RANGE = (env_int("TANDEM_DISPLAY_MIN", 100), env_int("TANDEM_DISPLAY_MAX", 399))
# Each local desktop runs as its own host user: uid TANDEM_SANDBOX_UID_BASE + its display.
TANDEM_SANDBOX_UID_BASE = env_int("TANDEM_SANDBOX_UID_BASE", 200000)
# Per local desktop: processes (and threads) of its user, memory of its processes in MiB.
TANDEM_SANDBOX_MAX_PROCESSES = env_int("TANDEM_SANDBOX_MAX_PROCESSES", 1024)
TANDEM_SANDBOX_MEMORY_MB = env_int("TANDEM_SANDBOX_MEMORY_MB", 2048)
# Per local desktop: the size of its HOME, a tmpfs of its own (0: a folder on the host's disk).
TANDEM_SANDBOX_HOME_MB = env_int("TANDEM_SANDBOX_HOME_MB", 1024)
# Desktops allowed the internet reach public addresses only; these private ones too (a proxy).
TANDEM_SANDBOX_INTERNET_ALLOW = [
    a for a in env("TANDEM_SANDBOX_INTERNET_ALLOW", "").split(",") if a.strip()
]

# Desktops in containers (provider "docker"): the engine (empty: DOCKER_HOST, else the local
# socket), the image of templates that name none, the address their VNC and agent ports are
# published on (127.0.0.1, or this host's private address when websockify runs elsewhere),
# each container's limits, and how long a start may take.
TANDEM_DOCKER_URL = env("TANDEM_DOCKER_URL")
TANDEM_DESKTOP_IMAGE = env("TANDEM_DESKTOP_IMAGE", "tandem-desktop:latest")
TANDEM_DOCKER_PUBLISH_HOST = env("TANDEM_DOCKER_PUBLISH_HOST", "127.0.0.1")
TANDEM_DOCKER_MEMORY = env("TANDEM_DOCKER_MEMORY", "2g")
TANDEM_DOCKER_CPUS = float(env("TANDEM_DOCKER_CPUS", "2"))
TANDEM_DOCKER_START_TIMEOUT = env_int("TANDEM_DOCKER_START_TIMEOUT", 60)

# Desktops on EC2 (provider "aws"): a template's image is an AMI. Credentials come from boto3's
# usual chain (environment, instance profile). The endpoint URL is for EC2-compatible services.
# A start waits for the instance to run and for its agent to answer, up to the start timeout.
TANDEM_AWS_REGION = env("TANDEM_AWS_REGION", "us-east-1")
TANDEM_AWS_ENDPOINT_URL = env("TANDEM_AWS_ENDPOINT_URL")
TANDEM_AWS_INSTANCE_TYPE = env("TANDEM_AWS_INSTANCE_TYPE", "t3.large")
TANDEM_AWS_SUBNET_ID = env("TANDEM_AWS_SUBNET_ID")
TANDEM_AWS_SECURITY_GROUP_IDS = [
    g for g in env("TANDEM_AWS_SECURITY_GROUP_IDS", "").split(",") if g
]
TANDEM_AWS_KEY_NAME = env("TANDEM_AWS_KEY_NAME")
TANDEM_AWS_START_TIMEOUT = env_int("TANDEM_AWS_START_TIMEOUT", 600)

# Streaming: one websockify process fronts every desktop (vm_pool.websockify_tokens); deploy/dev.sh
# starts it on TANDEM_WEBSOCKIFY_BIND (default 127.0.0.1:6080). Browsers reach it at
# TANDEM_WEBSOCKIFY_PUBLIC_URL (a proxy's wss:// address in production). A stream token opens
# connections for TANDEM_STREAM_TOKEN_SECONDS after it is issued.
TANDEM_WEBSOCKIFY_PUBLIC_URL = env("TANDEM_WEBSOCKIFY_PUBLIC_URL", "ws://127.0.0.1:6080")
TANDEM_STREAM_TOKEN_SECONDS = env_int("TANDEM_STREAM_TOKEN_SECONDS", 30)

# Settle detection after each step's action: the screen must be unchanged for the window; one on
# which nothing larger than a caret was drawn since the action is not settled before the minimum,
# the wait for a reaction to begin (vm_pool/screen/settle.py). tests/bench/reaction.py replays
# real programs' reactions: with both cores busy, a minimum of 0, 80 or 320 ms settled 24, 24 and
# 23% of them early (Save As starts drawing after 70-165 ms, then pauses anyway); a longer window
# did better (9% at 150 ms). The screen watch replaces what is observed early.
TANDEM_SETTLE_WINDOW_MS = env_int("TANDEM_SETTLE_WINDOW_MS", 50)
TANDEM_SETTLE_MIN_MS = env_int("TANDEM_SETTLE_MIN_MS", 0)

# Proposers by name; a project's model_settings picks one (see model_serving/registry.py).
TANDEM_PROPOSERS = {
    "openai": "model_serving.proposers.openai.OpenAIProposer",
    "baseline": "model_serving.proposers.baseline.BaselineProposer",
}
# Fine-tuning: base models a job may name, "name=path" pairs separated by commas (a job may also
# give an absolute path); where the platform writes adapters for vLLM to load, and the same
# folder as the vLLM host sees it; the share of episodes held out of training for evaluation
# (changing it changes the split, see model_serving/evaluation.py).
TANDEM_BASE_MODELS = dict(
    pair.split("=", 1) for pair in env("TANDEM_BASE_MODELS", "").split(",") if "=" in pair
)
TANDEM_ADAPTER_DIR = Path(env("TANDEM_ADAPTER_DIR", str(BASE_DIR / "var" / "adapters")))
TANDEM_VLLM_ADAPTER_DIR = env("TANDEM_VLLM_ADAPTER_DIR", str(TANDEM_ADAPTER_DIR))
TANDEM_HELD_OUT_SHARE = float(env("TANDEM_HELD_OUT_SHARE", "0.1"))
# The demo's base model (a tiny Qwen2.5-VL made by `manage.py demo_model`) and the demo endpoint
# that serves it with scripted answers (`manage.py demo_endpoint`): `make demo` runs both.
TANDEM_DEMO_BASE_MODEL = env("TANDEM_DEMO_BASE_MODEL", "demo-tiny-qwen")
TANDEM_DEMO_MODEL_DIR = Path(
    env("TANDEM_DEMO_MODEL_DIR", str(BASE_DIR / "var" / "models" / TANDEM_DEMO_BASE_MODEL))
)
TANDEM_DEMO_ENDPOINT = env("TANDEM_DEMO_ENDPOINT", "http://127.0.0.1:8100/v1")
TANDEM_TRAIN_QUEUE = env("TANDEM_TRAIN_QUEUE", "train")  # tests run workers on their own
# A running rollout whose heartbeat is this old lost its worker and runs again (rollouts.py).
TANDEM_ROLLOUT_STALE_SECONDS = env_int("TANDEM_ROLLOUT_STALE_SECONDS", 60)
# A pending evaluation (or a rollout's validation) silent this long lost its job and is taken
# up again (evaluations.py, rollouts.py).
TANDEM_EVALUATION_STALE_SECONDS = env_int("TANDEM_EVALUATION_STALE_SECONDS", 60)
# A rollout takes an action's screen once it also stayed still this long since its last drawing,
# for late reactions: it has no person and no screen watch. Where nothing was drawn since the
# action, it waits up to TANDEM_ROLLOUT_REACTION_MS from the action for a first drawing: a GTK
# Save As dialog starts drawing 70-165 ms after its key with both cores busy, past 300 ms under
# a whole test suite's load, and a mousepad just started drew typed text past 500 ms there (each
# step was then recorded as having changed nothing), past 1 s with a second test process busy.
# Only a step that draws nothing waits it out. On a local desktop, where the kernel accounts
# its programs' work (vm_pool.sandbox.activity), the wait lasts instead while they are at work,
# up to the observation's limit (5 s), and ends as soon as they are idle.
TANDEM_ROLLOUT_QUIET_MS = env_int("TANDEM_ROLLOUT_QUIET_MS", 300)
TANDEM_ROLLOUT_REACTION_MS = env_int("TANDEM_ROLLOUT_REACTION_MS", 1000)
# An ended episode's evaluator reads its desktop once the screen stayed the same this long.
TANDEM_EVALUATION_QUIET_MS = env_int("TANDEM_EVALUATION_QUIET_MS", 1000)
# The evaluation jail (vm_pool/evaluation/jail.py), where what a desktop left is parsed: its
# own host user (not root, below every desktop's uid), and its limits per evaluation.
TANDEM_EVALUATION_UID = env_int("TANDEM_EVALUATION_UID", TANDEM_SANDBOX_UID_BASE - 1)
TANDEM_EVALUATION_MEMORY_MB = env_int("TANDEM_EVALUATION_MEMORY_MB", 2048)  # address space
TANDEM_EVALUATION_CPU_S = env_int("TANDEM_EVALUATION_CPU_S", 60)
TANDEM_EVALUATION_WALL_S = env_int("TANDEM_EVALUATION_WALL_S", 90)
TANDEM_EVALUATION_TMP_MB = env_int("TANDEM_EVALUATION_TMP_MB", 512)
TANDEM_EVALUATION_FILE_MB = env_int("TANDEM_EVALUATION_FILE_MB", 256)
TANDEM_EVALUATION_PROCESSES = env_int("TANDEM_EVALUATION_PROCESSES", 64)
if TANDEM_EVALUATION_UID <= 0:
    raise ValueError("TANDEM_EVALUATION_UID must be a user of its own, not root")
# A branch task's replay of a rollout (annotation/branches.py) must show each recorded screen
# but for this share of its pixels (a blinking caret is about 0.01% of 1280x800).
TANDEM_BRANCH_REPLAY_TOLERANCE = float(env("TANDEM_BRANCH_REPLAY_TOLERANCE", "0.002"))
# A fine-tuning attempt silent this long (no step, no log line) is taken over by a new one.
TANDEM_FINETUNE_STALE_SECONDS = env_int("TANDEM_FINETUNE_STALE_SECONDS", 900)
# Streamed proposal text is forwarded to the browser at most this often.
TANDEM_PROPOSAL_DELTA_MS = env_int("TANDEM_PROPOSAL_DELTA_MS", 50)

# Personal access tokens: the longest life a token may ask for.
TANDEM_TOKEN_MAX_DAYS = env_int("TANDEM_TOKEN_MAX_DAYS", 365)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "backend.accounts.authentication.AccessTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "backend.accounts.permissions.TokenScopePermission",
    ],
    "DEFAULT_PAGINATION_CLASS": "backend.api.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.SearchFilter",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "backend.api.error_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Tandem API",
    "DESCRIPTION": (
        "Projects, task queues, episodes, reviews and datasets of Tandem, the human-in-the-loop "
        "annotation platform for GUI agents. Authenticate with a personal access token: "
        "`Authorization: Bearer tdm_…`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI and Redoc are served from our own static files: no CDN needed.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("TANDEM_LOG_LEVEL", "INFO")},
}

# Behind a reverse proxy that terminates HTTPS (the compose deployment's usual front).
if env_bool("TANDEM_BEHIND_HTTPS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = True

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("TANDEM_SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
