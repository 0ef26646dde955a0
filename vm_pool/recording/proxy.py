"""The one websockify of a deployment, with the recording gate on its control streams.

    python -m vm_pool.recording.proxy [--token-source SETTINGS] HOST:PORT

A view-only stream is proxied as websockify always does (its client's input reaches only the
view-only VNC server, which ignores it). A control stream's client bytes are cut into RFB
messages (``rfb.py``): what asks for pixels goes on to the VNC server as it came, the person's
input goes through the ``Gate`` (recorded, then passed to the desktop through its control), and
whatever the gate refuses closes the stream with the reason (WebSocket close code 4000 and the
reason's text, which the workspace shows).
"""

import argparse
import logging
import select
import time
from typing import TYPE_CHECKING, Any, NoReturn

from websockify.websocketproxy import ProxyRequestHandler, WebSocketProxy

from vm_pool.desktop import MAX_CLIPBOARD_CHARS
from vm_pool.recording.rfb import ClientStream, Dropped, Forward, Refused
from vm_pool.websockify_tokens import TandemTokens

if TYPE_CHECKING:
    from vm_pool.recording.gate import Gate

CLOSE_REFUSED = 4000
logger = logging.getLogger(__name__)
IDLE_CHECK_S = 0.5


class GatedProxyHandler(ProxyRequestHandler):
    def do_proxy(self, target: Any) -> None:
        recording_id = self.server.token_plugin.recording_id
        if recording_id is None:
            super().do_proxy(target)
            return
        from django.db import connection  # Django is set up by the token plugin, before this

        try:
            self._gated_proxy(target, recording_id)
        except self.CClose:
            raise
        except Exception as error:
            # Logged with its traceback: websockify's own handler keeps quiet about it.
            logger.exception("the recording gate of recording %s failed", recording_id)
            raise self.CClose(1011, "the recording gate failed") from error
        finally:
            connection.close()

    def _gated_proxy(self, target: Any, recording_id: int) -> None:
        from vm_pool import pool  # here: the token plugin sets the app registry up first
        from vm_pool.models import Recording  # here: after the app registry's setup
        from vm_pool.recording.gate import Gate, GateClosed  # here: after the registry's setup

        recording = Recording.objects.select_related("desktop").get(pk=recording_id)
        if recording.desktop is None:
            raise self.CClose(CLOSE_REFUSED, "the desktop is gone")
        gate = Gate(recording, pool.control_for(recording.desktop))
        stream = ClientStream(MAX_CLIPBOARD_CHARS)
        to_client: list[bytes] = []
        to_target: list[bytes] = []
        pending = False
        checked = time.monotonic()
        try:
            gate.check()  # the lease may have lapsed since the token was resolved
        except GateClosed as error:
            self._refuse(gate, error)
        while True:
            wlist = ([target] if to_target else []) + (
                [self.request] if to_client or pending else []
            )
            wait = gate.due_in()  # a held pointer move passes once its interval is over
            wait = IDLE_CHECK_S if wait is None else min(wait, IDLE_CHECK_S)
            ins, outs, _ = select.select([self.request, target], wlist, [], wait)
            try:
                if self.request in outs:
                    pending = bool(self.send_frames(to_client))
                    to_client = []
                if self.request in ins:
                    bufs, closed = self.recv_frames()
                    for buf in bufs:
                        for message in stream.feed(buf):
                            if isinstance(message, Forward):
                                to_target.append(message.data)
                            elif not isinstance(message, Dropped):
                                gate.take(message)
                    if closed:
                        raise self.CClose(closed["code"], closed["reason"])
                if target in outs:
                    data = to_target.pop(0)
                    sent = target.send(data)
                    if sent < len(data):
                        to_target.insert(0, data[sent:])
                if target in ins:
                    data = target.recv(self.buffer_size)
                    if not data:
                        raise self.CClose(1000, "Target closed")
                    to_client.append(data)
                gate.flush()
                if time.monotonic() - checked > IDLE_CHECK_S:
                    gate.check()  # a lapsed lease closes the stream even with no input
                    checked = time.monotonic()
            except (Refused, GateClosed) as error:
                self._refuse(gate, error)

    def _refuse(self, gate: "Gate", error: Exception) -> NoReturn:
        """Note on the recording why its stream closes, and close it with that reason."""
        reason = str(error)
        gate.refuse(reason)
        # A WebSocket close reason is at most 123 bytes.
        closing = reason.encode()[:123].decode(errors="ignore")
        raise self.CClose(CLOSE_REFUSED, closing) from error


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--token-source", default=None, help="the Django settings module")
    parser.add_argument("listen", help="HOST:PORT to serve WebSocket connections on")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    host, _, port = args.listen.rpartition(":")
    server = WebSocketProxy(
        RequestHandlerClass=GatedProxyHandler,
        listen_host=host.strip("[]"),
        listen_port=int(port),
        token_plugin=TandemTokens(args.token_source),
    )
    server.start_server()


if __name__ == "__main__":
    main()
