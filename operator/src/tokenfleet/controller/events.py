"""The shape of kopf's event posters (kopf.info, kopf.warn), for the controller's callers."""

from __future__ import annotations

from typing import Any, Protocol


class PostEvent(Protocol):
    # obj: kopf's Body or anything body-like (it reads apiVersion, kind and metadata).
    def __call__(self, obj: Any, /, *, reason: str, message: str = ...) -> None: ...
