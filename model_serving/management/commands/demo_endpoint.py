"""Runs the demo endpoint (``model_serving.demo_endpoint``): an OpenAI-compatible server with
scripted answers that serves the demo base model and the adapters loaded into it.

manage.py demo_endpoint [--bind 127.0.0.1:8100]   # default: TANDEM_DEMO_ENDPOINT's host:port
"""

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from model_serving.demo_endpoint import DemoEndpoint, make_server


class Command(BaseCommand):
    help = "Serve scripted UI-TARS answers for the demo base model and its adapters."

    def add_arguments(self, parser: CommandParser) -> None:
        default = urlsplit(settings.TANDEM_DEMO_ENDPOINT).netloc
        parser.add_argument("--bind", default=default, help=f"host:port (default {default})")

    def handle(self, *args: Any, **options: Any) -> None:
        host, _, port = options["bind"].rpartition(":")
        endpoint = DemoEndpoint(settings.TANDEM_DEMO_BASE_MODEL)
        endpoint.load_adapters_under(settings.TANDEM_ADAPTER_DIR)
        server = make_server(endpoint, host or "127.0.0.1", int(port))
        self.stdout.write(
            f"demo endpoint (scripted answers) on http://{options['bind']}/v1 serving "
            f"{', '.join(m['id'] for m in endpoint.models()['data'])}"
        )
        try:
            server.serve_forever()
        finally:
            server.server_close()
