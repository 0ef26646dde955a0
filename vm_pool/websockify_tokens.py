"""websockify's token plugin: the token in a stream URL → the VNC address of its desktop.

One websockify process serves every desktop (``vm_pool.recording.proxy``, which passes a
control stream's input through the recording gate)::

    python -m vm_pool.recording.proxy 127.0.0.1:6080

``--token-source`` names the Django settings module; without it, ``DJANGO_SETTINGS_MODULE`` or
``backend.settings``.

The lookup goes through Django and ``vm_pool.streaming.resolve_stream_token`` rather than
through psycopg and SQL of its own, so that the rule deciding whether a token opens a stream
exists in one place only. websockify serves each connection in a forked child process and calls
``lookup`` there: the parent sets Django up without opening a database connection, and every
lookup closes the connection it opened, so no connection is shared between processes or held
for the life of a stream.
"""

import os

import django
from websockify.token_plugins import BasePlugin

DEFAULT_SETTINGS = "backend.settings"


class TandemTokens(BasePlugin):
    def __init__(self, src: str | None = None) -> None:
        super().__init__(src)
        if src:
            os.environ["DJANGO_SETTINGS_MODULE"] = src
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", DEFAULT_SETTINGS)
        django.setup()

    # The recording a control token's connection goes through the gate for; None for a
    # view-only one. websockify looks one token up in each connection's own child process.
    recording_id: int | None = None

    def lookup(self, token: str) -> tuple[str, int | str] | None:
        from django.db import connection

        from vm_pool.streaming import (  # here: it needs the app registry, set up in __init__
            resolve_control_token,
            resolve_stream_token,
        )

        try:
            target = resolve_stream_token(token)
            if target is not None:
                return target
            control = resolve_control_token(token)
            if control is None:
                return None
            target, self.recording_id = control
            return target
        finally:
            connection.close()
