"""The one logging helper of the library. Library code never configures structlog.

When the host has configured structlog, gpuscout logs through it. When nobody has, structlog's
default would print every event, debug included, to stdout, which would corrupt a host's output;
so until then events go to the standard library logger ``gpuscout`` (warnings reach stderr through
logging's last-resort handler, debug is dropped unless the host enables it).
"""

from __future__ import annotations

import logging
from typing import Any

import structlog


def get_logger(**initial: Any) -> Any:
    """A structlog logger for gpuscout with ``initial`` keys bound (see the module docstring)."""
    if structlog.is_configured():
        return structlog.get_logger("gpuscout", **initial)
    return structlog.wrap_logger(
        logging.getLogger("gpuscout"),
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.processors.KeyValueRenderer(key_order=["event"]),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
        **initial,
    )
