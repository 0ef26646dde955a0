"""A plain RFB 3.8 client over a WebSocket (security None), as the recording gate's tests and
benchmark drive a control stream: it sends exactly the bytes it is told to, as a hostile client
could and a browser's noVNC never would."""

import struct
import time

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from vm_pool.recording import rfb

RETURN, BACKSPACE, CTRL, SHIFT = 0xFF0D, 0xFF08, 0xFFE3, 0xFFE1
SHIFTED = set('~!@#$%^&*()_+{}|:"<>?')


class RfbClient:
    """The client side of RFB 3.8 with security None, over the gate's WebSocket."""

    def __init__(self, url: str) -> None:
        self.ws: ClientConnection = connect(url, open_timeout=5)
        self._pending = b""
        version = self.read(12)
        if version != b"RFB 003.008\n":
            raise ConnectionError(f"not an RFB 3.8 server: {version!r}")
        self.send(b"RFB 003.008\n")
        offered = self.read(self.read(1)[0])
        if rfb.SECURITY_NONE not in offered:
            raise ConnectionError(f"the server offers no security type None: {list(offered)}")
        self.send(bytes([rfb.SECURITY_NONE]))
        if self.read(4) != b"\0\0\0\0":
            raise ConnectionError("the server refused the security type None")
        self.send(b"\x01")  # shared
        width, height = struct.unpack(">HH", self.read(4))
        self.read(16)
        self.read(struct.unpack(">I", self.read(4))[0])
        self.screen = (width, height)

    def read(self, count: int) -> bytes:
        while len(self._pending) < count:
            self._pending += self.ws.recv(timeout=10)
        data, self._pending = self._pending[:count], self._pending[count:]
        return data

    def send(self, data: bytes) -> None:
        self.ws.send(data)

    def closed_reason(self, seconds: float = 10) -> str:
        """The reason the gate gave when it closed the stream (it must close it)."""
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self.ws.recv(timeout=deadline - time.monotonic())
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 4000, closed
            return closed.rcvd.reason
        raise AssertionError("the gate did not close the stream")

    def click(self, x: int, y: int) -> None:
        for buttons in (0, 1, 0):
            self.send(rfb.pointer_event(x, y, buttons))

    def key(self, keysym: int) -> None:
        self.send(rfb.key_event(keysym, True))
        self.send(rfb.key_event(keysym, False))

    def type_text(self, text: str) -> None:
        """Each character as a person types it on a US keyboard: its key pressed and released
        (its keysym is the character), inside Shift for a capital or a shifted symbol."""
        for char in text:
            if char.isupper() or char in SHIFTED:
                self.chord(SHIFT, ord(char))
            else:
                self.key(RETURN if char == "\n" else ord(char))

    def chord(self, *keysyms: int) -> None:
        """Keys pressed in order, released in reverse: a hotkey."""
        for keysym in keysyms:
            self.send(rfb.key_event(keysym, True))
        for keysym in reversed(keysyms):
            self.send(rfb.key_event(keysym, False))

    def close(self) -> None:
        self.ws.close()
