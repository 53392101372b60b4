"""Incremental Server-Sent Events parser for OpenAI-style streams (pure).

Network reads split events anywhere, so bytes are buffered until a blank line ends an
event. Only `data:` fields matter for the OpenAI protocol; comments (lines starting with
':', used as keep-alive pings) and other fields are dropped.
"""

from __future__ import annotations


class SSEParser:
    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the data payloads of every event now complete."""
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        buffer = self._buffer + data if self._buffer else data
        if b"\n\n" not in buffer:
            self._buffer = buffer
            return []
        *events, self._buffer = buffer.split(b"\n\n")
        payloads: list[bytes] = []
        for event in events:
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    payloads.append(line[6:] if line[5:6] == b" " else line[5:])
        return payloads

    def close(self) -> list[bytes]:
        """Flush an unterminated last event (a server that ends without a blank line)."""
        rest, self._buffer = self._buffer, b""
        return self.feed(rest + b"\n\n") if rest.strip() else []
