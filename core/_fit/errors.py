"""The one error of ``gpuscout fit``, and how a value from a file is shown in a message."""

from __future__ import annotations

from gpuscout.errors import GpuscoutError


class ModelError(GpuscoutError):
    """A model file that cannot be read or estimated: one line naming the file, and where
    possible the byte offset and the key or tensor."""


def shown(value: object, limit: int = 60) -> str:
    """``value`` for a message: repr, control characters escaped, cut to ``limit``."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["ModelError", "shown"]
