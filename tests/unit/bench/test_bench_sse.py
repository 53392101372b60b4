"""SSE parsing across arbitrary network splits."""

from __future__ import annotations

import pytest

from tokenfleet.bench.sse import SSEParser

STREAM = b'data: {"a":1}\n\n: ping\n\ndata: {"b":2}\n\nevent: x\ndata: {"c":3}\n\ndata: [DONE]\n\n'
EXPECTED = [b'{"a":1}', b'{"b":2}', b'{"c":3}', b"[DONE]"]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(STREAM)])
def test_any_split_yields_the_same_payloads(size: int) -> None:
    parser = SSEParser()
    got: list[bytes] = []
    for i in range(0, len(STREAM), size):
        got += parser.feed(STREAM[i : i + size])
    got += parser.close()
    assert got == EXPECTED


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'data: {"a":1}\r\n\r\n', [b'{"a":1}']),  # CRLF line ends
        (b'data:{"a":1}\n\n', [b'{"a":1}']),  # no space after the colon
        (b"", []),
    ],
)
def test_variants(data: bytes, expected: list[bytes]) -> None:
    assert SSEParser().feed(data) == expected


def test_close_flushes_an_unterminated_event() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: [DONE]") == []
    assert parser.close() == [b"[DONE]"]
