"""Isolated discovery, the host's side: every plugin's enumerate in a child process of its own.

One child (the "zygote", ``gpuscout._host.isolation.child``) is started from a fresh interpreter with
exactly the Scout's environment. It imports gpuscout and the plugins once, then forks one worker
per plugin before any driver is loaded. Each worker runs under a small supervisor process of its
own (its parent, in a process group of its own) and holds no descriptor but its own answer and
stderr pipes: a worker that crashes (a segfaulting driver), exits, hangs, floods, writes garbage
on any descriptor, forks, kills its parent or its process group costs only its plugin. The
zygote reports each plugin as soon as its worker is done, with the signal name or exit status
and the worker's last stderr line, or kills it at the deadline. Merge and rank stay in the host.

The zygote runs in its own session and is a child subreaper; its whole process group, and all
that left it, is killed when the call ends, however it ends (``gpuscout._host.children``). Where
``os.fork`` does not exist (Windows) one child per plugin is started instead.

The exchange is JSON: the host writes the request on the child's stdin and reads one JSON line
per plugin from its stdout, as each comes (the child moves its own stdout to stderr before
importing any plugin, so nothing a plugin prints can corrupt it). What the zygote said before
it died, or before the deadline, is kept: only the plugins it had not answered for fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from gpuscout._host import children
from gpuscout._host.children import (
    Tail,
    boot_code,
    child_argv,
    communicate,
    exit_text,
    kill_group,
    last_words,
)
from gpuscout._records.device import DeviceInfo
from gpuscout._records.fields import PcieLink, PeerLink

#: Seconds the zygote may take for its own start (interpreter, gpuscout, the plugins' imports)
#: beyond the enumerate deadline, before the host gives up on it.
START_ALLOWANCE = 5.0
#: Most bytes of answer read from one worker.
MAX_ANSWER = 32 << 20
#: Most bytes of one plugin's line from the zygote: its worker's answer, its name and words.
#: The zygote's whole answer is bounded by the sum over its plugins.
MAX_LINE = MAX_ANSWER + (64 << 10)
#: The line that ends the zygote's answer.
END = {"end": True}

_BOOT = boot_code("gpuscout._host.isolation.child", "main")


class IsolationError(Exception):
    """The zygote itself failed: it could not start, or did not answer within its deadline."""


def encode_device(device: DeviceInfo) -> dict[str, Any]:
    """Every field of ``device`` as JSON values (unlike the wire format, nothing is left out:
    the host must get the very record the plugin returned)."""
    out: dict[str, Any] = {}
    for f in attrs.fields(DeviceInfo):
        value = getattr(device, f.name)
        if isinstance(value, (PcieLink, PeerLink)):
            value = attrs.asdict(value)
        elif isinstance(value, tuple):
            value = [attrs.asdict(v) if isinstance(v, PeerLink) else v for v in value]
        elif isinstance(value, Mapping):
            value = dict(value)
        out[f.name] = value
    return out


def decode_device(data: Any, where: str) -> DeviceInfo:
    """The DeviceInfo ``encode_device`` wrote; ValueError naming ``where`` for anything else."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
    try:
        fields = dict(data)
        link = fields.get("pcie_link")
        if isinstance(link, dict):
            fields["pcie_link"] = PcieLink(**link)
        peers = fields.get("peers")
        if isinstance(peers, list):
            fields["peers"] = [PeerLink(**p) if isinstance(p, dict) else p for p in peers]
        return DeviceInfo(**fields)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


@attrs.define
class PluginOutcome:
    """What became of one plugin in its child: ``status`` "ok", "failed" or "timeout", why
    (``error``), its notes, its records encoded by ``encode_device`` (the host decodes and checks
    them) and its enumerate's wall time in seconds."""

    name: str
    status: str
    error: str = ""
    notes: list[str] = attrs.field(factory=list)
    devices: list[Any] = attrs.field(factory=list)
    elapsed: float = 0.0


#: Each key of an outcome's line, and the type its value must have.
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "status": str,
    "error": str,
    "notes": list,
    "devices": list,
    "elapsed": (int, float),
}


def outcome(data: Any) -> PluginOutcome:
    """The PluginOutcome a line of the zygote's answer (or a worker's answer, with its
    ``name``) holds; ValueError naming the first thing wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"expected an object, got {type(data).__name__}")
    for key, value in data.items():
        kind = _FIELDS.get(key)
        if kind is None:
            raise ValueError(f"unknown key {str(key)[:40]!r}")
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ValueError(
                f"{key}: expected {getattr(kind, '__name__', 'a number')}, got {type(value).__name__}"
            )
    if "name" not in data or data.get("status") not in ("ok", "failed", "timeout"):
        raise ValueError("a name and a status of ok, failed or timeout are needed")
    if not all(isinstance(n, str) for n in data.get("notes", ())):
        raise ValueError("notes: expected a list of str")
    return PluginOutcome(**data)


class Answer:
    """The zygote's answer as it comes: one JSON line per plugin, each at most MAX_LINE bytes,
    then ``END``. A line for a plugin that was not asked for, or a second one, is ignored;
    after an unreadable line nothing more is believed (``broken`` says why)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = set(names)
        self.outcomes: dict[str, PluginOutcome] = {}
        self.ended = False
        self.broken = ""
        self._line = bytearray()

    def add(self, chunk: bytes) -> None:
        if self.broken or self.ended:
            return
        self._line += chunk
        while not self.broken and (end := self._line.find(b"\n")) >= 0:
            line = bytes(self._line[:end])
            del self._line[: end + 1]
            self._take(line)
        if len(self._line) > MAX_LINE:
            self.broken = f"a line over {MAX_LINE} bytes"
        if self.broken:
            del self._line[:]

    def _take(self, line: bytes) -> None:
        from gpuscout._records.bounds import MAX_JSON_RECORDS, too_many_objects

        # The zygote fails a worker whose answer holds more records; a line with more was not
        # written by it (a hostile import writing on its descriptor): refused before decoding.
        if too_many_objects(line, MAX_JSON_RECORDS + 64):
            self.broken = f"a line of more than {MAX_JSON_RECORDS} records"
            return
        try:
            data = json.loads(line)
            if data == END:
                self.ended = True
                return
            got = outcome(data)
        except (ValueError, RecursionError) as exc:
            self.broken = f"an unreadable line: {str(exc)[:200]}"
            return
        if got.name in self.names:
            self.outcomes.setdefault(got.name, got)


def enumerate_isolated(
    plugins: Sequence[str],
    *,
    env: Mapping[str, str],
    platform: str,
    root: str,
    timeout: float,
) -> dict[str, PluginOutcome]:
    """Run each named plugin's enumerate in a child process of its own, in parallel.

    ``plugins`` are names the child can load by itself (built-ins and entry points). Returns
    one outcome per plugin: a plugin the zygote did not answer for (it died, overran or wrote
    garbage first) is ``failed`` with what became of the zygote. Raises IsolationError only
    when the zygote cannot be started; the caller reports that for every plugin.
    """
    if not plugins:
        return {}
    if not hasattr(os, "fork"):
        # No fork: one child per plugin, each loading and enumerating its plugin alone.
        results: dict[str, PluginOutcome] = {}

        def one(name: str) -> None:
            try:
                results.update(_run_child([name], env, platform, root, timeout, fork=False))
            except BaseException as exc:  # reported here, per plugin
                results[name] = PluginOutcome(name, "failed", f"isolation child: {exc}")

        threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in plugins]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
    return _run_child(list(plugins), env, platform, root, timeout, fork=True)


def _run_child(
    plugins: list[str], env: Mapping[str, str], platform: str, root: str, timeout: float, fork: bool
) -> dict[str, PluginOutcome]:
    request = json.dumps(
        {
            "plugins": plugins,
            "env": dict(env),
            "platform": platform,
            "root": root,
            "timeout": timeout,
            "fork": fork,
            "parent": os.getpid(),
        }
    ).encode()
    try:
        child = children.start(
            child_argv(_BOOT), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except (OSError, ValueError) as exc:
        raise IsolationError(f"cannot start the isolation child: {exc}") from None
    answer = Answer(plugins)
    err = Tail()
    late = ""
    try:
        limit = timeout + START_ALLOWANCE
        try:
            communicate(child, request, time.monotonic() + limit, answer.add, err)
        except TimeoutError:
            late = f"the isolation child did not answer within {limit:g} s"
    finally:
        kill_group(child)
    missing = [name for name in plugins if name not in answer.outcomes]
    if missing:
        if answer.broken:
            why = f"the isolation child's answer became unreadable ({answer.broken})"
        elif late:
            why = late
        elif child.returncode:
            why = f"the isolation child {exit_text(child.returncode)} before it answered for it"
        else:
            why = "the isolation child exited without an answer for it"
        why += last_words(err.bytes())
        for name in missing:
            answer.outcomes[name] = PluginOutcome(name, "failed", why)
    return answer.outcomes


__all__ = [
    "END",
    "MAX_ANSWER",
    "MAX_LINE",
    "START_ALLOWANCE",
    "Answer",
    "IsolationError",
    "PluginOutcome",
    "decode_device",
    "encode_device",
    "enumerate_isolated",
    "outcome",
]
