"""Making a recording of this machine (``gpuscout record DIR``): what discovery read, only that.

While a recording discovery runs, every context is a ``RecordingContext``: each file, directory,
link and device node a plugin (or the system-memory reader) looks at is noted, and each plugin
passes what its driver answered to ``Context.record``. The environment is a ``TrackedEnv``
that notes the names read through it. Afterwards ``Recorder.write`` copies the noted files
(each at most ``MAX_READ_BYTES``, as a plugin would read them) into ``root/``, writes the
answers and the manifest, and renames the finished folder into place, so a recording is never
seen half-written. The format is in ``gpuscout._recording.replay`` and docs/recordings.md.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gpuscout._machine.context import Context
from gpuscout._recording.anonymize import Anonymizer
from gpuscout._recording.replay import ANSWERS, FORMAT, MANIFEST, PLUGIN_NAME, ROOT
from gpuscout.errors import GpuscoutError
from gpuscout.version import VERSION

#: Names of variables that are never recorded, whoever reads them: they may hold secrets.
#: Anywhere in the name, in any case: ``NVIDIA_APIKEY`` and ``CUDA_ACCESSKEY`` are secrets too.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|COOKIE|SESSION|AUTH|PRIVATE|KEY", re.IGNORECASE)
#: The most bytes of all copied files together (a recording of a big box is a few MiB).
MAX_TOTAL_BYTES = 256 << 20


#: The module attribute by which a plugin names the variables that change what it finds
#: (visibility, loaders, drivers), read by drivers or children rather than asked for through
#: the context: names, or prefixes ending in ``*`` (``("CUDA_*", "NVIDIA_*")``). They are
#: recorded when set, besides every variable discovery asked for by name.
RECORDED_ENV_ATTRIBUTE = "GPUSCOUT_RECORDED_ENV"
#: gpuscout's own settings, always recorded when set.
OWN_PREFIX = "GPUSCOUT_"


def declared_families(plugins: Iterable[Any]) -> list[str]:
    """The ``GPUSCOUT_RECORDED_ENV`` entries of ``plugins`` (malformed ones ignored)."""
    found: list[str] = []
    for plugin in plugins:
        declared = getattr(plugin, RECORDED_ENV_ATTRIBUTE, ())
        if isinstance(declared, (tuple, list)):
            found += [n for n in declared[:100] if isinstance(n, str) and 0 < len(n) <= 200]
    return found


def _wanted(name: str, families: Iterable[str]) -> bool:
    if name.startswith(OWN_PREFIX):
        return True
    return any(name.startswith(f[:-1]) if f.endswith("*") else name == f for f in families)


class TrackedEnv(Mapping[str, str]):
    """A read-only environment that notes every name asked for (``get``, ``in``).

    Copying or listing it (``dict(env)``, ``items``, ``env[name]`` while iterating) notes
    nothing, so a child's whole environment does not become "read".
    """

    _gpuscout_read_only = True

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self.read: set[str] = set()
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> str:
        return self._env[name]

    def get(self, name: str, default: Any = None) -> Any:
        """As dict.get, noting ``name``."""
        with self._lock:
            self.read.add(name)
        return self._env.get(name, default)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            with self._lock:
                self.read.add(name)
        return name in self._env

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)

    def recorded(self, families: Iterable[str] = ()) -> dict[str, str]:
        """The variables asked for, gpuscout's own and those of ``families`` (names, or
        prefixes ending in ``*``), where set; never one whose name looks like a secret's."""
        families = list(families)
        with self._lock:
            names = set(self.read)
        names |= {n for n in self._env if _wanted(n, families)}
        return {n: self._env[n] for n in sorted(names) if n in self._env and not SECRET_NAME.search(n)}


class Recorder:
    """What one recording discovery looked at and what its drivers answered (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Path -> what was done to it: "file" (read), "dir" (listed), "link" (read as a link),
        #: "node" (looked at as a device node), "name" (seen in a listing), "path" (looked up).
        self.paths: dict[str, str] = {}
        self.answers: dict[str, dict[str, Any]] = {}
        self.problems: list[str] = []
        self._where: dict[str, str] = {}
        self._nodes: dict[str, str] = {}
        self._node_errno: dict[str, int | None] = {}
        #: The root the discovery read under (``/`` on the live machine): files are copied
        #: from it as discovery read them, resolved inside it.
        self.root = "/"

    def saw(self, path: str, how: str, where: str | None = None) -> None:
        """Note that ``path`` (absolute, resolved by name) was used as ``how``; ``where`` is
        the file that stands for it (``path`` itself on the live root)."""
        with self._lock:
            # A read or a listing beats a bare lookup or a name seen in a listing.
            if self.paths.get(path) in (None, "path", "name"):
                self.paths[path] = how
                self._where[path] = where or path

    def node(self, path: str, state: str) -> None:
        """Note what device node ``path`` was found to be (kept as such in the recording)."""
        with self._lock:
            self._nodes[path] = state

    def node_errno(self, path: str, code: int | None) -> None:
        """Note the errno with which device node ``path`` refused to open."""
        with self._lock:
            self._node_errno[path] = code

    def answer(self, plugin: str, key: str, value: Any) -> None:
        """Keep ``value`` as ``plugin``'s answer ``key``, if it is plain JSON."""
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            with self._lock:
                self.problems.append(
                    f"plugin {plugin}: answer {key!r} is not plain JSON ({exc}); not recorded"
                )
            return
        with self._lock:
            self.answers.setdefault(plugin or "core", {})[str(key)] = value

    def answer_item(self, plugin: str, key: str, item: str, value: Any) -> None:
        """Keep ``value`` as ``item`` of ``plugin``'s answer object ``key`` (one sysctl among
        several), if it is plain JSON; the other items stay."""
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            with self._lock:
                self.problems.append(
                    f"plugin {plugin}: answer {key!r}[{item!r}] is not plain JSON ({exc}); not recorded"
                )
            return
        with self._lock:
            answers = self.answers.setdefault(plugin or "core", {})
            current = answers.get(str(key))
            merged = dict(current) if isinstance(current, dict) else {}
            merged[str(item)] = value
            answers[str(key)] = merged

    # -- writing --------------------------------------------------------------------------------

    def write(
        self,
        target: str,
        *,
        platform: str,
        env: Mapping[str, str],
        anonymize: bool = False,
        machine: str = "",
    ) -> dict[str, Any]:
        """Write the recording to directory ``target`` (which must not exist, or be empty);
        returns the manifest. Raises GpuscoutError when it cannot be written."""
        target = os.path.abspath(target)
        if os.path.lexists(target) and (not os.path.isdir(target) or os.listdir(target)):
            raise GpuscoutError(f"{target}: exists and is not an empty directory; not overwritten")
        parent = os.path.dirname(target) or "."
        try:
            work = tempfile.mkdtemp(prefix=".gpuscout-record-", dir=parent)
        except OSError as exc:
            raise GpuscoutError(f"{parent}: cannot write a recording there: {exc.strerror}") from None
        try:
            anon = Anonymizer(socket.gethostname()) if anonymize else None
            self._copy_tree(os.path.join(work, ROOT), anon)
            answers_dir = os.path.join(work, ANSWERS)
            os.mkdir(answers_dir)
            with self._lock:
                answers = {p: dict(a) for p, a in self.answers.items()}
            for plugin, values in sorted(answers.items()):
                if PLUGIN_NAME.fullmatch(plugin) is None:
                    self.problems.append(f"plugin {plugin!r}: not a recordable name; answers left out")
                    continue
                data = anon.json(values) if anon else values
                _write_text(
                    os.path.join(answers_dir, f"{plugin}.json"),
                    json.dumps(data, indent=1, sort_keys=True) + "\n",
                )
            recorded_env = dict(env)
            manifest: dict[str, Any] = {
                "format": FORMAT,
                "gpuscout": VERSION,
                "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "machine": machine,
                "platform": platform,
                "env": anon.json(recorded_env) if anon else recorded_env,
                "anonymized": bool(anonymize),
            }
            if self.problems:
                manifest["problems"] = list(self.problems)
            _write_text(os.path.join(work, MANIFEST), json.dumps(manifest, indent=2) + "\n")
            if os.path.isdir(target):
                os.rmdir(target)  # empty, checked above
            os.rename(work, target)
        except OSError as exc:
            shutil.rmtree(work, ignore_errors=True)
            raise GpuscoutError(f"{target}: the recording could not be written: {exc}") from None
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return manifest

    def _copy_tree(self, root: str, anon: Anonymizer | None) -> None:
        os.mkdir(root)
        with self._lock:
            paths = sorted(self.paths.items())
        # Read as discovery read them: under the same root, every link resolved inside it.
        reader = Context(env={}, platform="", root=self.root)
        total = 0
        for logical, how in paths:
            # Names are anonymized as the files' text is (a cgroup folder named by a pod's UUID
            # is found again through the anonymized /proc/self/cgroup).
            dest = os.path.join(root, (anon.text(logical) if anon else logical).lstrip("/"))
            if how == "link":
                target = reader.read_link(logical)
                if target is not None and not target.startswith("/"):
                    _ensure_dir(os.path.dirname(dest))
                    if not os.path.lexists(dest):
                        os.symlink(anon.text(target) if anon else target, dest)
                continue
            try:
                info = reader._stat(logical)
            except (OSError, ValueError):
                continue  # missing then, missing in the recording
            if stat.S_ISDIR(info.st_mode):
                _ensure_dir(dest)
            elif stat.S_ISREG(info.st_mode) and how not in ("file", "node"):
                # Only its name was used (listed, or looked up): kept, empty.
                _ensure_dir(os.path.dirname(dest))
                if not os.path.lexists(dest):
                    _write_bytes(dest, b"")
            elif stat.S_ISREG(info.st_mode):
                data = reader._read_bytes(logical)
                if data is None or total + len(data) > MAX_TOTAL_BYTES:
                    continue  # over the read limit: a plugin would not have read it either
                total += len(data)
                _ensure_dir(os.path.dirname(dest))
                if anon:
                    data = anon.file(logical, data)
                _write_bytes(dest, data)
            elif stat.S_ISCHR(info.st_mode):
                # A device node becomes a plain file: present and permitted, or "denied".
                state = self._nodes.get(logical) or reader.device_node(logical)
                if state != "missing":
                    _ensure_dir(os.path.dirname(dest))
                    denied = (
                        b"denied EPERM\n" if self._node_errno.get(logical) == errno.EPERM else b"denied\n"
                    )
                    _write_bytes(dest, b"" if state == "present" else denied)


def _ensure_dir(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        return
    if os.path.lexists(path):
        os.unlink(path)  # a name first seen as a file turned out to hold entries
    os.makedirs(path, exist_ok=True)


def _write_bytes(path: str, data: bytes) -> None:
    if os.path.isdir(path):
        return
    with open(path, "wb") as f:
        f.write(data)


def _write_text(path: str, text: str) -> None:
    _write_bytes(path, text.encode("utf-8"))


class RecordingContext(Context):
    """A Context that notes every name it is asked about in its ``recorder``."""

    def _seen(self, path: str, how: str) -> None:
        inside = self._inside(path) if path.startswith("/") else None
        if inside is not None and self.recorder is not None:
            self.recorder.root = self.root
            # Names are kept relative to the root the recording is made on (``/`` when live).
            relative = os.path.relpath(inside, self.root or "/")
            self.recorder.saw("/" if relative == "." else "/" + relative, how, inside)

    def path(self, path: str) -> str:
        """As Context.path, noting the name."""
        self._seen(path, "path")
        return super().path(path)

    def _read_bytes(self, path: str) -> bytes | None:
        self._seen(path, "file")
        return super()._read_bytes(path)

    def list_dir(self, path: str) -> list[str] | None:
        """As Context.list_dir, noting the directory and each name in it."""
        names = super().list_dir(path)
        self._seen(path, "dir")
        for name in names or ():
            full = f"{path.rstrip('/')}/{name}"
            self._seen(full, "name")
        return names

    def read_link(self, path: str) -> str | None:
        """As Context.read_link, noting the link."""
        self._seen(path, "link")
        return super().read_link(path)

    def device_node(self, path: str) -> str:
        """As Context.device_node, noting the node and what it was found to be."""
        self._seen(path, "node")
        state = super().device_node(path)
        if self.recorder is not None:
            self.recorder.node(path, state)
        return state


__all__ = [
    "RECORDED_ENV_ATTRIBUTE",
    "SECRET_NAME",
    "Recorder",
    "RecordingContext",
    "TrackedEnv",
    "declared_families",
]
