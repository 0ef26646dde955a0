"""ASGI entry point: HTTP through Django behind the request-body limits, WebSockets through
Channels with session auth."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
django_http = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from backend.body_limits import BodyLimit  # noqa: E402
from backend.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Django types its handler with narrower message types than the ASGI spec's.
        "http": BodyLimit(django_http),  # type: ignore[arg-type]
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
# Start-up's objects (modules, settings, the app) are left out of the collector's full passes:
# they scan only what requests made since (see ``backend.celery.freeze_startup_objects``).
gc.freeze()
