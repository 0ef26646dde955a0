"""A VNC client's bytes (RFB, RFC 6143, client to server) cut into messages, for the recording
gate. Pure: bytes in, messages out.

The gate reads what a person's browser sends before any of it reaches the desktop:

- The handshake (the protocol version, the security type, ClientInit) and the messages that only
  ask for pixels (SetPixelFormat, SetEncodings, FramebufferUpdateRequest, EnableContinuousUpdates,
  ClientFence) are ``Forward``: passed to the desktop's view-only VNC server as they came.
- PointerEvent, KeyEvent (and QEMU's extended KeyEvent) and ClientCutText are the person's
  input: they reach the desktop only through the gate, which records them first.
- Anything else (SetDesktopSize, xvp's power actions, a message type no client of ours sends) is
  ``Refused``: it would change the desktop unrecorded, or cannot be cut safely.

A ClientCutText is refused as soon as its length is read when it is over the limit: its text is
never buffered. The extended clipboard's messages (a negative length) are read the same way;
only a ``provide`` of text is a paste (``Dropped`` otherwise), inflated no further than the limit.

Only the security type None is accepted: the VNC server behind the gate has no password (who may
connect is the stream token's business).
"""

import struct
import zlib
from dataclasses import dataclass

from vm_pool.desktop import ClipboardInput, KeyInput, PointerInput

# The most bytes one message other than ClientCutText can take (SetEncodings with every
# encoding there is); a client sending more is not a VNC client.
MAX_MESSAGE_BYTES = 4 + 4 * 1024
FIXED = {0: 20, 3: 10, 150: 10}  # SetPixelFormat, FramebufferUpdateRequest, ContinuousUpdates
SECURITY_NONE = 1
# The extended clipboard (a ClientCutText with a negative length): its flags.
EXTENDED_TEXT = 1
EXTENDED_CAPS = 1 << 24
EXTENDED_PROVIDE = 1 << 28


class Refused(Exception):
    """The client sent what the gate does not pass; the message says what."""


@dataclass(frozen=True)
class Forward:
    data: bytes


@dataclass(frozen=True)
class Dropped:
    """A message that is neither input nor the VNC server's: nothing of it passes."""


Message = Forward | Dropped | PointerInput | KeyInput | ClipboardInput


class ClientStream:
    """The client's bytes as they come, cut into whole messages."""

    def __init__(self, max_clipboard_bytes: int) -> None:
        self.max_clipboard_bytes = max_clipboard_bytes
        self._buffer = bytearray()
        self._phase = "version"

    def feed(self, data: bytes) -> list[Message]:
        self._buffer += data
        out: list[Message] = []
        while True:
            message = self._next()
            if message is None:
                return out
            out.append(message)

    def _take(self, count: int) -> bytes | None:
        if len(self._buffer) < count:
            return None
        taken = bytes(self._buffer[:count])
        del self._buffer[:count]
        return taken

    def _next(self) -> Message | None:
        match self._phase:
            case "version":
                version = self._take(12)
                if version is None:
                    return None
                if not version.startswith(b"RFB 003.") or not version.endswith(b"\n"):
                    raise Refused("not an RFB client")
                # 3.3 leaves the security type to the server; later versions choose one.
                self._phase = "init" if version[8:11] in (b"003", b"004", b"005") else "security"
                return Forward(version)
            case "security":
                chosen = self._take(1)
                if chosen is None:
                    return None
                if chosen[0] != SECURITY_NONE:
                    raise Refused(f"security type {chosen[0]} (only None is served)")
                self._phase = "init"
                return Forward(chosen)
            case "init":
                shared = self._take(1)
                if shared is None:
                    return None
                self._phase = "messages"
                return Forward(shared)
        return self._message()

    def _message(self) -> Message | None:
        if not self._buffer:
            return None
        kind = self._buffer[0]
        if kind in FIXED:
            data = self._take(FIXED[kind])
            return None if data is None else Forward(data)
        if kind == 2:  # SetEncodings
            if len(self._buffer) < 4:
                return None
            (count,) = struct.unpack(">H", self._buffer[2:4])
            if 4 + 4 * count > MAX_MESSAGE_BYTES:
                raise Refused(f"SetEncodings with {count} encodings")
            data = self._take(4 + 4 * count)
            return None if data is None else Forward(data)
        if kind == 248:  # ClientFence: 3 padding, 4 flags, 1 length, the payload (≤ 64)
            if len(self._buffer) < 9:
                return None
            length = self._buffer[8]
            if length > 64:
                raise Refused(f"ClientFence of {length} bytes")
            data = self._take(9 + length)
            return None if data is None else Forward(data)
        if kind == 4:  # KeyEvent
            data = self._take(8)
            if data is None:
                return None
            down, keysym = struct.unpack(">B2xI", data[1:])
            return KeyInput(keysym, bool(down))
        if kind == 5:  # PointerEvent
            data = self._take(6)
            if data is None:
                return None
            buttons, x, y = struct.unpack(">BHH", data[1:])
            return PointerInput(x, y, buttons)
        if kind == 255:  # QEMU's messages: only the extended KeyEvent is input
            if len(self._buffer) < 2:
                return None
            if self._buffer[1] != 0:
                raise Refused(f"QEMU message {self._buffer[1]}")
            data = self._take(12)
            if data is None:
                return None
            down, keysym, _ = struct.unpack(">HII", data[2:])
            return KeyInput(keysym, bool(down))
        if kind == 6:  # ClientCutText: 3 padding, a 4-byte length, Latin-1 text
            if len(self._buffer) < 8:
                return None
            (length,) = struct.unpack(">i", self._buffer[4:8])
            if abs(length) > self.max_clipboard_bytes:
                raise Refused(
                    f"a clipboard paste of {abs(length)} bytes (at most {self.max_clipboard_bytes})"
                )
            data = self._take(8 + abs(length))
            if data is None:
                return None
            if length < 0:  # the extended clipboard: flags, then zlib-compressed formats
                return self._extended_clipboard(data[8:])
            return ClipboardInput(data[8:].decode("latin-1"))
        raise Refused(f"RFB message type {kind}")

    def _extended_clipboard(self, body: bytes) -> Message:
        """An extended clipboard message: the text a ``provide`` carries is the person's paste;
        its other actions (capabilities, requests, notices) are the client's business and pass
        nowhere."""
        if len(body) < 4:
            raise Refused("an extended clipboard message without its flags")
        (flags,) = struct.unpack(">I", body[:4])
        # Capabilities name every action the client knows, provide among them: not a paste.
        if flags & EXTENDED_CAPS or not flags & EXTENDED_PROVIDE or not flags & EXTENDED_TEXT:
            return Dropped()
        inflate = zlib.decompressobj()
        try:
            formats = inflate.decompress(body[4:], self.max_clipboard_bytes * 4 + 8)
        except zlib.error as error:
            raise Refused(f"an extended clipboard paste that does not inflate: {error}") from None
        if inflate.unconsumed_tail:
            raise Refused(f"a clipboard paste over {self.max_clipboard_bytes} characters")
        if len(formats) < 4:
            raise Refused("an extended clipboard paste without its text")
        (size,) = struct.unpack(">I", formats[:4])
        text = formats[4 : 4 + size].rstrip(b"\0").decode("utf-8", errors="replace")
        if len(text) > self.max_clipboard_bytes:
            raise Refused(f"a clipboard paste over {self.max_clipboard_bytes} characters")
        return ClipboardInput(text)


def key_event(keysym: int, down: bool) -> bytes:
    return struct.pack(">BBxxI", 4, int(down), keysym)


def pointer_event(x: int, y: int, buttons: int) -> bytes:
    return struct.pack(">BBHH", 5, buttons, x, y)


def cut_text(text: str) -> bytes:
    data = text.encode("latin-1")
    return struct.pack(">BxxxI", 6, len(data)) + data
