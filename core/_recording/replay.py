"""Reading a recording of a machine (``gpuscout record``), so that discovery runs against it.

A recording is a directory (docs/recordings.md is the reference)::

    recording.json        the manifest: {"format": 1, "platform": "linux", "env": {...}, ...}
    root/                 the files the plugins read, as under ``--root`` (sys/, proc/, dev/)
    answers/<plugin>.json what each plugin's driver answered, one JSON object per plugin

Everything is checked before discovery starts, and a recording that breaks a rule raises one
``RecordingError`` naming the file and the problem: the manifest's keys and types, answer files
that are regular files of at most ``MAX_ANSWER_BYTES`` holding one JSON object, a tree under
``root/`` of regular files (each at most ``Context``'s read limit), directories and links that
stay inside ``root/``. Nothing is followed out of the recording.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from gpuscout._machine.context import MAX_READ_BYTES, READ_FLAGS
from gpuscout.errors import RecordingError

#: The format this gpuscout reads and writes.
FORMAT = 1
MANIFEST = "recording.json"
ROOT = "root"
ANSWERS = "answers"
#: The largest manifest and the largest answer file read.
MAX_MANIFEST_BYTES = 1 << 20
MAX_ANSWER_BYTES = 16 << 20
#: The most bytes of all answer files read together (each file counted once, however many
#: names link to it), and the most JSON objects one of them may hold (counted before decoding).
MAX_ANSWERS_TOTAL = 64 << 20
MAX_RECORDS = 100_000
#: The most entries the tree under root/ may hold (a sysfs recording has a few thousand).
MAX_TREE_ENTRIES = 200_000
#: Plugin names an answer file may carry (the host compares names in lower case).
PLUGIN_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
#: Manifest keys and the types they must have (all but ``format`` and ``platform`` optional).
_KEYS: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "platform": str,
    "env": dict,
    "machine": str,
    "created": str,
    "gpuscout": str,
    "anonymized": bool,
    "sources": (dict, list, str),
}


@attrs.frozen
class Recording:
    """A checked recording: where it is, its platform and environment, each plugin's answers."""

    path: str
    platform: str
    env: Mapping[str, str]
    answers: Mapping[str, Mapping[str, Any]]
    manifest: Mapping[str, Any]
    #: Each answer file by plugin name, checked (name, kind, size) but not yet read.
    answer_files: Mapping[str, str] = attrs.field(factory=dict)

    def with_answers(self, plugins: Iterable[str]) -> Recording:
        """This recording with the answer files of ``plugins`` (names, any case) read and
        checked, and only theirs: a file for a plugin that does not exist is never read. A
        file linked under several names is read once; RecordingError for a bad one."""
        wanted = {p.strip().lower() for p in plugins}
        answers = dict(self.answers)
        by_inode: dict[tuple[int, int], dict[str, Any]] = {}
        total = 0
        for plugin in sorted(wanted & self.answer_files.keys()):
            if plugin in answers:
                continue
            where = self.answer_files[plugin]
            try:
                info = os.stat(where)
            except OSError as exc:
                raise RecordingError(f"{where}: cannot be read: {exc.strerror}") from None
            key = (info.st_dev, info.st_ino)
            if key not in by_inode:
                total += info.st_size
                if total > MAX_ANSWERS_TOTAL:
                    raise RecordingError(
                        f"{where}: the answer files hold more than {MAX_ANSWERS_TOTAL} bytes"
                    )
                data = _json(where, MAX_ANSWER_BYTES, f"plugin {plugin}'s driver answers", MAX_RECORDS)
                if not isinstance(data, dict):
                    raise RecordingError(f"{where}: expected a JSON object, got {type(data).__name__}")
                by_inode[key] = data
            answers[plugin] = by_inode[key]
        return attrs.evolve(self, answers=answers)

    @property
    def root(self) -> str:
        """The folder that stands for ``/`` (it may be missing: then no file is found)."""
        return os.path.join(self.path, ROOT)

    def answers_for(self, plugin: str) -> Mapping[str, Any]:
        """``plugin``'s driver answers (``{}`` when the recording holds none for it)."""
        return self.answers.get(plugin.strip().lower(), {})


def _read_file(path: str, limit: int, what: str) -> bytes:
    """The bytes of regular file ``path`` (at most ``limit``), never blocking on a FIFO."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise RecordingError(f"{path}: missing ({what})") from None
    except (OSError, ValueError) as exc:
        raise RecordingError(f"{path}: cannot be read: {exc}") from None
    if not stat.S_ISREG(mode):
        raise RecordingError(f"{path}: not a regular file ({what})")
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as exc:
        raise RecordingError(f"{path}: cannot be read: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordingError(f"{path}: not a regular file ({what})")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise RecordingError(f"{path}: cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise RecordingError(f"{path}: larger than {limit} bytes ({what})")
    return b"".join(chunks)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _int(text: str) -> int:
    # Length first: int() of thousands of digits is slow; nothing recorded needs more than 64 bits.
    if len(text.lstrip("-")) > 20 or not -(1 << 64) < int(text) < 1 << 64:
        raise ValueError(f"{text[:24]}... does not fit in 64 bits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:24]} does not fit in a double")
    return value


def _json(path: str, limit: int, what: str, records: int | None = None) -> Any:
    data = _read_file(path, limit, what)
    if records is not None:
        from gpuscout._records.bounds import too_many_objects

        if too_many_objects(data, records):
            raise RecordingError(f"{path}: more than {records} JSON objects ({what})")
    try:
        return json.loads(
            data.decode("utf-8"), parse_constant=_reject_constant, parse_int=_int, parse_float=_float
        )
    except UnicodeDecodeError as exc:
        raise RecordingError(f"{path}: not UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise RecordingError(f"{path}: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, huge integers, NaN
        raise RecordingError(f"{path}: not valid JSON: {exc}") from None


def _manifest(path: str) -> dict[str, Any]:
    where = os.path.join(path, MANIFEST)
    data = _json(where, MAX_MANIFEST_BYTES, "the manifest of a recording")
    if not isinstance(data, dict):
        raise RecordingError(f"{where}: expected a JSON object, got {type(data).__name__}")
    for key in ("format", "platform"):
        if key not in data:
            raise RecordingError(f"{where}: no {key!r} key")
    fmt = data["format"]
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt != FORMAT:
        raise RecordingError(
            f"{where}: format {fmt!r:.40} is not one this gpuscout reads (it reads format {FORMAT})"
        )
    for key, kind in _KEYS.items():
        if key in data and (
            not isinstance(data[key], kind) or (isinstance(data[key], bool) and kind is not bool)
        ):
            raise RecordingError(
                f"{where}: {key!r} must be {_kind_name(kind)}, got {type(data[key]).__name__}"
            )
    if not data["platform"] or len(data["platform"]) > 64:
        raise RecordingError(f"{where}: 'platform' must be a sys.platform value such as 'linux'")
    for name, value in data.get("env", {}).items():
        if not isinstance(value, str):
            raise RecordingError(f"{where}: env[{name!r:.60}] must be a str, got {type(value).__name__}")
        if not name or "=" in name or "\x00" in name or "\x00" in value:
            raise RecordingError(f"{where}: env[{name!r:.60}] is not a variable name and value")
    return data


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "a whole number", str: "a str", dict: "an object", bool: "true or false", list: "a list"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _answers(path: str) -> dict[str, str]:
    """Each answer file by plugin name: named ``<plugin>.json``, a regular file of at most
    MAX_ANSWER_BYTES (by its size: a sparse 2 GiB file is refused unread). Read later, and
    only for the plugins a Scout has (``Recording.with_answers``)."""
    folder = os.path.join(path, ANSWERS)
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise RecordingError(f"{folder}: cannot be read: {exc.strerror}") from None
    if not stat.S_ISDIR(mode):
        raise RecordingError(f"{folder}: not a directory")
    found: dict[str, str] = {}
    for name in sorted(os.listdir(folder))[:10_000]:
        where = os.path.join(folder, name)
        plugin, dot, ext = name.rpartition(".")
        if not dot or ext != "json" or PLUGIN_NAME.fullmatch(plugin) is None:
            raise RecordingError(f"{where}: not <plugin>.json (a lower-case plugin name)")
        try:
            info = os.lstat(where)
        except OSError as exc:
            raise RecordingError(f"{where}: cannot be read: {exc.strerror}") from None
        what = f"plugin {plugin}'s driver answers"
        if not stat.S_ISREG(info.st_mode):
            raise RecordingError(f"{where}: not a regular file ({what})")
        if info.st_size > MAX_ANSWER_BYTES:
            raise RecordingError(f"{where}: larger than {MAX_ANSWER_BYTES} bytes ({what})")
        found[plugin] = where
    return found


def _inside(base: str, link: str, target: str) -> bool:
    """Whether symbolic link ``link`` (under ``base``) pointing at ``target`` stays in ``base``,
    judged by the names alone, as ``Context.path`` judges a path."""
    if target.startswith("/") or os.path.splitdrive(target)[0]:
        return False
    parts = os.path.relpath(os.path.dirname(link), base).split(os.sep)
    parts = [p for p in parts if p not in ("", ".")]
    for part in target.replace(os.sep, "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return False
            parts.pop()
        else:
            parts.append(part)
    return True


def check_tree(base: str) -> None:
    """Raise RecordingError for anything under ``base`` a recorded tree may not hold: special
    files (a FIFO, a socket, a device), files over the read limit, links leading outside."""
    if not os.path.lexists(base):
        return
    if os.path.islink(base) or not os.path.isdir(base):
        raise RecordingError(f"{base}: not a directory")
    count = 0
    folders = [base]  # iterative: a tree thousands of folders deep is no RecursionError
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                names = [entry.name for entry in entries]
        except OSError as exc:
            raise RecordingError(f"{folder}: cannot be read: {exc.strerror}") from None
        for name in names:
            count += 1
            if count > MAX_TREE_ENTRIES:
                raise RecordingError(f"{base}: more than {MAX_TREE_ENTRIES} entries")
            where = os.path.join(folder, name)
            try:
                info = os.lstat(where)
            except OSError as exc:
                raise RecordingError(f"{where}: cannot be read: {exc.strerror}") from None
            if stat.S_ISLNK(info.st_mode):
                target = os.readlink(where)
                if not _inside(base, where, target):
                    raise RecordingError(f"{where}: a link to {target!r:.200} leads outside the recording")
            elif stat.S_ISREG(info.st_mode):
                if info.st_size > MAX_READ_BYTES:
                    raise RecordingError(f"{where}: larger than {MAX_READ_BYTES} bytes")
            elif stat.S_ISDIR(info.st_mode):
                folders.append(where)
            else:
                raise RecordingError(
                    f"{where}: not a regular file, directory or link (a "
                    "device node is recorded as a plain file under dev/)"
                )


def load(path: str | os.PathLike[str]) -> Recording:
    """The recording at ``path``, checked; RecordingError naming the file when it breaks a rule."""
    try:
        where = os.fspath(path)
    except TypeError:
        raise RecordingError(f"replay must be a recording's directory, got {path!r:.60}") from None
    if not isinstance(where, str) or "\x00" in where:
        raise RecordingError(f"replay must be a str path without NUL, got {where!r:.60}")
    if not os.path.isdir(where):
        what = "not a directory" if os.path.exists(where) else "no such directory"
        raise RecordingError(f"{where}: {what} (a recording is a directory with {MANIFEST})")
    manifest = _manifest(where)
    answers = _answers(where)
    check_tree(os.path.join(where, ROOT))
    return Recording(
        path=where,
        platform=manifest["platform"],
        env=dict(manifest.get("env", {})),
        answers={},
        manifest=manifest,
        answer_files=answers,
    )


__all__ = ["FORMAT", "MANIFEST", "Recording", "RecordingError", "check_tree", "load"]
