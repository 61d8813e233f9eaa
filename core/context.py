"""What a plugin may know about the world: environment, platform, filesystem root, deadline."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import attrs

from gpuscout.log import get_logger


class EnvEntry(NamedTuple):
    """One visibility value: ``selection[position]`` appends ``value`` to variable ``name``."""

    position: int
    name: str
    value: str


@attrs.define
class Context:
    """Handed to plugin hooks; plugins read nothing from the process that is not in here.

    ``env`` is the environment the plugin must use (never ``os.environ``), ``platform`` a
    ``sys.platform`` value, ``root`` the prefix of every file read (``/`` on a live machine, a
    recorded tree in tests), ``deadline`` a ``time.monotonic()`` value or None.
    """

    env: Mapping[str, str]
    platform: str
    root: str = "/"
    deadline: float | None = None
    plugin: str = ""
    notes: list[str] = attrs.field(factory=list)
    log: Any = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        if self.log is None:
            self.log = get_logger().bind(plugin=self.plugin) if self.plugin else get_logger()

    def path(self, path: str) -> str:
        """``path`` (absolute, e.g. ``/sys/class/drm``) under this context's root."""
        if self.root in ("", "/"):
            return path
        return os.path.join(self.root, path.lstrip("/"))

    def read_text(self, path: str) -> str | None:
        """The text of ``path`` under the root, or None when it cannot be read."""
        try:
            with open(self.path(path), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return None

    def note(self, message: str) -> None:
        """Record why this plugin found what it found (shown in its report's ``error``)."""
        self.notes.append(message)

    def time_left(self) -> float | None:
        """Seconds until the deadline (never negative), or None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def for_plugin(self, name: str, deadline: float | None = None) -> Context:
        """A fresh context for one plugin's call, with its own notes and bound logger."""
        return Context(
            env=self.env, platform=self.platform, root=self.root, deadline=deadline, plugin=name
        )
