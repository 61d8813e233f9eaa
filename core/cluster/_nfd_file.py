"""The Node Feature Discovery (NFD) feature file: its rules, how it is rendered and how it is
written.

NFD's worker reads every file in ``/etc/kubernetes/node-feature-discovery/features.d/`` (its
``local`` source): one ``<prefix>/<name>=<value>`` label per line, ``# +expiry-time=<RFC3339>``
as a directive, dot-files and files over 64 kB ignored. This module renders and checks the file
(``render``, ``check_labels``, ``check_prefix``, ``parse_duration`` for the expiry) and writes it
atomically (``write``): a temporary dot-file in the same directory, fsync, rename, so NFD never
reads half a file. The labels themselves come from ``gpuscout.cluster.nfd``, which re-exports
every name here.

Label names and values follow the Kubernetes rules (``IsQualifiedName``, ``IsValidLabelValue``
of k8s.io/apimachinery): a name part and a value are at most 63 characters of
``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`` (a value may be empty), a prefix is a DNS subdomain.
"""

from __future__ import annotations

import errno
import math
import os
import re
import secrets
import stat
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

from gpuscout.errors import GpuscoutError
from gpuscout.sizes import sizes_apart

#: Where NFD's worker looks for local feature files (its default ``features.d``).
NFD_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
DEFAULT_PREFIX = "gpuscout.io"
#: The file's name in the directory (no leading dot: NFD ignores dot-files).
DEFAULT_NAME = "gpuscout"
#: NFD ignores a feature file bigger than this many bytes.
MAX_FILE_BYTES = 65536
#: Longest label name part and label value (Kubernetes).
MAX_NAME = 63
#: Longest prefix (a DNS subdomain).
MAX_PREFIX = 253
#: Domains whose prefixes are Kubernetes' own, and the ones of them NFD lets a feature file use
#: (with their subdomains, as NFD does).
RESERVED_DOMAINS = ("kubernetes.io", "k8s.io")
NFD_DOMAINS = ("feature.node.kubernetes.io", "profile.node.kubernetes.io")

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)
_UNIT_SECONDS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "μs": Fraction(1, 10**6),
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}


# -- rules ----------------------------------------------------------------------------------------


def _in_domain(prefix: str, domain: str) -> bool:
    return prefix == domain or prefix.endswith("." + domain)


def check_prefix(prefix: str) -> str:
    """``prefix`` when it is a DNS subdomain outside Kubernetes' own domains (NFD's
    ``feature.node.kubernetes.io`` and ``profile.node.kubernetes.io`` allowed), else raise
    GpuscoutError naming it and the rule."""
    rule = (
        "a DNS subdomain: lower-case labels of [a-z0-9-], each starting and ending with a "
        f"letter or digit and at most 63 long, joined by dots, at most {MAX_PREFIX} in all"
    )
    labels_ = prefix.split(".")
    if not (
        0 < len(prefix) <= MAX_PREFIX
        and all(len(part) <= MAX_NAME and _DNS_LABEL.fullmatch(part) for part in labels_)
    ):
        raise GpuscoutError(f"NFD label prefix {prefix!r} is not {rule}")
    if any(_in_domain(prefix, d) for d in RESERVED_DOMAINS) and not any(
        _in_domain(prefix, d) for d in NFD_DOMAINS
    ):
        raise GpuscoutError(
            f"NFD label prefix {prefix!r} is in a domain Kubernetes reserves "
            f"({' or '.join(RESERVED_DOMAINS)}); of those NFD accepts only "
            f"{' and '.join(NFD_DOMAINS)} (and their subdomains)"
        )
    return prefix


def check_labels(labels: Mapping[str, str]) -> None:
    """Raise GpuscoutError naming the first label whose name part or value breaks the
    Kubernetes rules (at most 63 characters of ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?``,
    a value may also be empty)."""
    for name, value in labels.items():
        if len(name) > MAX_NAME or not _NAME.fullmatch(name):
            raise GpuscoutError(
                f"NFD label name {name!r} is not a valid Kubernetes label name "
                f"(at most {MAX_NAME} of [-A-Za-z0-9_.], alphanumeric at the ends)"
            )
        if value and (len(value) > MAX_NAME or not _NAME.fullmatch(value)):
            raise GpuscoutError(
                f"NFD label {name!r}: value {value!r} is not a valid Kubernetes "
                f"label value (at most {MAX_NAME} of [-A-Za-z0-9_.], "
                "alphanumeric at the ends)"
            )


def parse_duration(text: str) -> timedelta:
    """A Go duration (``90s``, ``30m``, ``1h``, ``2h30m``, ``1.5h``; units ns, us, ms, s, m, h)
    greater than 0; anything else raises GpuscoutError naming ``text``."""
    parts = list(_DURATION_PART.finditer(text))
    whole = "".join(m.group(0) for m in parts)
    if not parts or whole != text:
        raise GpuscoutError(f"expected a duration such as 90s, 30m, 1h or 2h30m, got {text!r}")
    seconds = sum((Fraction(m.group(1)) * _UNIT_SECONDS[m.group(2)] for m in parts), Fraction(0))
    if seconds <= 0:
        raise GpuscoutError(f"expected a duration greater than 0, got {text!r}")
    try:
        return timedelta(microseconds=math.ceil(seconds * 10**6))
    except OverflowError:
        raise GpuscoutError(f"duration {text!r} is too long") from None


def render(
    labels: Mapping[str, str],
    prefix: str = DEFAULT_PREFIX,
    expiry: timedelta | None = None,
    now: datetime | None = None,
) -> str:
    """The feature file: ``# +expiry-time=<now + expiry, RFC3339 UTC>`` first when ``expiry``
    is given (``now`` defaults to the clock; a naive ``now`` is read as UTC), then one
    ``<prefix>/<name>=<value>`` line per label, sorted by name. Raises GpuscoutError for a bad
    prefix, name or value, and for a file over 64 kB (NFD would ignore it)."""
    check_prefix(prefix)
    check_labels(labels)
    lines = []
    if expiry is not None:
        if expiry <= timedelta(0):
            raise GpuscoutError(f"expected an expiry greater than 0, got {expiry}")
        start = now or datetime.now(UTC)
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        try:
            at = (start + expiry).astimezone(UTC)
        except OverflowError:
            raise GpuscoutError(f"expiry {expiry} after {start} is past the year 9999") from None
        lines.append(f"# +expiry-time={at:%Y-%m-%dT%H:%M:%SZ}")
    lines += [f"{prefix}/{name}={labels[name]}" for name in sorted(labels)]
    text = "".join(f"{line}\n" for line in lines)
    size = len(text.encode("utf-8"))
    if size > MAX_FILE_BYTES:
        would, limit = sizes_apart(size, MAX_FILE_BYTES)
        raise GpuscoutError(
            f"the NFD feature file would be {would} ({len(labels)} labels); "
            f"NFD ignores files over {limit}, so none is written"
        )
    return text


# -- writing --------------------------------------------------------------------------------------


_REASONS = {
    errno.ENOENT: "no such directory",
    errno.ENOTDIR: "not a directory",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EISDIR: "is a directory",
}


def _reason(exc: OSError) -> str:
    if exc.errno in _REASONS:
        return _REASONS[exc.errno]
    return (exc.strerror or str(exc)).lower()


def _check_target(directory: Path, target: Path) -> None:
    """Refuse, with the reason, a directory that is not one and a target that is neither a
    regular file nor a symbolic link (a rename would fail on it, or replace what it is)."""
    try:
        if not stat.S_ISDIR(os.stat(directory).st_mode):
            raise GpuscoutError(f"cannot write NFD features to {directory}: not a directory")
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        if not directory.is_dir():
            raise GpuscoutError(f"cannot write NFD features to {directory}: no such directory") from None
        return
    except OSError as exc:
        raise GpuscoutError(f"cannot write NFD features to {directory}: {_reason(exc)}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise GpuscoutError(f"cannot write NFD features to {target}: it is {what}")


def check_name(name: str) -> None:
    """Raise GpuscoutError unless ``name`` is a feature file name ``write`` takes: not empty,
    no leading dot (NFD ignores dot-files), no '/' or NUL."""
    if not name or name.startswith(".") or "/" in name or "\0" in name:
        raise GpuscoutError(
            f"NFD feature file name {ascii(name)[:80]}: expected a file name that "
            "does not start with a dot (NFD ignores dot-files) and holds no '/'"
        )


def write(directory: str | os.PathLike[str], text: str, name: str = DEFAULT_NAME) -> Path:
    """Write ``text`` to ``directory/name`` atomically and return that path.

    The text goes to a new dot-file ``.<name>.<random>.tmp`` (NFD ignores dot-files) in the
    same directory, mode 0644, which is fsynced, renamed onto the target and the directory
    fsynced: NFD sees the old file or the new one, never a part. A symbolic link at the target
    is replaced, never written through. Any failure removes the temporary file, leaves an old
    file as it was, and raises GpuscoutError naming the directory and the cause.
    """
    check_name(name)
    data = text.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        would, limit = sizes_apart(len(data), MAX_FILE_BYTES)
        raise GpuscoutError(
            f"the NFD feature file would be {would}; NFD ignores files over {limit}, so none is written"
        )
    folder = Path(directory)
    target = folder / name
    _check_target(folder, target)
    temporary = folder / f".{name}.{secrets.token_hex(8)}.tmp"
    fd = -1
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        os.fchmod(fd, 0o644)  # whatever the umask: NFD's worker may run as another user
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(temporary, target)
    except BaseException as exc:  # Ctrl-C too: never leave the temporary file behind
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(temporary)
        except OSError:
            pass  # never created, or already renamed away
        if isinstance(exc, OSError):
            raise GpuscoutError(f"cannot write NFD features to {folder}: {_reason(exc)}") from None
        raise
    _sync_directory(folder, target)
    return target


def _sync_directory(folder: Path, target: Path) -> None:
    """fsync ``folder`` so the rename survives a crash; file systems that cannot sync a
    directory (EINVAL) are left as they are."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOTSUP, errno.EROFS):
            return
        raise GpuscoutError(f"wrote {target}, but could not sync {folder}: {_reason(exc)}") from None
