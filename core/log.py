"""The one logging helper of the library. Library code never configures structlog."""

from __future__ import annotations

from typing import Any

import structlog


def get_logger(**initial: Any) -> Any:
    """A structlog logger named ``gpuscout`` with ``initial`` keys bound."""
    return structlog.get_logger("gpuscout", **initial)
