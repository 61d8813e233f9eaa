"""Bounded sequential reads of a file's header: the only place ``gpuscout._fit.reader`` touches
the file. Regular files only, opened without blocking; every read within the size left, a cap
and a deadline; no memory map, so a file that shrinks while read is an error, not SIGBUS."""

from __future__ import annotations

import os
import stat
import struct
import time
from typing import Any

from gpuscout._fit.errors import ModelError, shown
from gpuscout._machine.context import READ_FLAGS

_CHUNK = 1 << 16


class Stream:
    """Sequential bounded reads from a file descriptor through a small buffer."""

    def __init__(self, fd: int, path: str, size: int, deadline: float | None, cap: int) -> None:
        self.fd, self.path, self.size, self.deadline, self.cap = fd, path, size, deadline, cap
        self.buf = b""
        self.at = 0  # index into buf
        self.base = 0  # file offset of buf[0]
        self.little = True

    @property
    def offset(self) -> int:
        return self.base + self.at

    def left(self) -> int:
        return self.size - self.offset

    def fail(self, what: str, at: int | None = None) -> ModelError:
        return ModelError(f"{self.path}: offset {self.offset if at is None else at}: {what}")

    def _fill(self, need: int, what: str) -> None:
        """Make ``need`` bytes available at ``at``."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self.fail(f"reading the header took too long (while reading {what})")
        have = len(self.buf) - self.at
        if need > self.left():
            raise self.fail(f"file ends after {self.size} bytes while reading {what}")
        if self.offset + need > self.cap:
            raise self.fail(f"header larger than {self.cap >> 20} MiB (while reading {what})")
        parts = [self.buf[self.at :]]
        self.base += self.at
        self.at = 0
        want = max(need, _CHUNK)
        while have < need:
            try:
                chunk = os.read(self.fd, min(want - have, self.size - self.base - have))
            except OSError as exc:
                raise self.fail(f"cannot read: {exc.strerror or exc}") from exc
            if not chunk:
                raise self.fail(
                    f"file ends after {self.base + have} bytes while reading {what} "
                    "(it shrank while being read)"
                )
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)

    def take(self, n: int, what: str) -> bytes:
        if len(self.buf) - self.at < n:
            self._fill(n, what)
        data = self.buf[self.at : self.at + n]
        self.at += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n > self.left():
            raise self.fail(f"file ends after {self.size} bytes while reading {what}")
        inside = len(self.buf) - self.at
        if n <= inside:
            self.at += n
            return
        target = self.offset + n
        if target > self.cap:
            raise self.fail(f"header larger than {self.cap >> 20} MiB (while reading {what})")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self.fail(f"reading the header took too long (while reading {what})")
        os.lseek(self.fd, target, os.SEEK_SET)
        self.buf, self.at, self.base = b"", 0, target

    def scalar(self, code: str, size: int, what: str) -> Any:
        if len(self.buf) - self.at < size:
            self._fill(size, what)
        value = struct.unpack_from(("<" if self.little else ">") + code, self.buf, self.at)[0]
        self.at += size
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar("I", 4, what))

    def u64(self, what: str) -> int:
        return int(self.scalar("Q", 8, what))

    def string(self, what: str, limit: int | None = None) -> str | int:
        """A GGUF string; past ``limit`` bytes it is skipped and its length returned instead."""
        start = self.offset
        n = self.u64(f"the length of {what}")
        if n > self.left():
            raise self.fail(
                f"{what}: a string of {n} bytes runs past the end of the file ({self.left()} bytes left)",
                start,
            )
        if limit is not None and n > limit:
            self.skip(n, what)
            return n
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(
                f"{what}: not valid UTF-8 (byte {exc.start} of the string)", start + 8 + exc.start
            ) from None

    def skip_strings(self, count: int, what: str) -> None:
        """Skip ``count`` GGUF strings without decoding them (the tokenizer's tokens)."""
        fmt = "<Q" if self.little else ">Q"
        unpack = struct.unpack_from
        done = 0
        while done < count:
            if len(self.buf) - self.at < 8:
                self._fill(8, what)
            buf, at, end = self.buf, self.at, len(self.buf)
            # Walk the strings that lie whole in the buffer, then refill.
            while done < count and at + 8 <= end:
                n = unpack(fmt, buf, at)[0]
                if at + 8 + n > end:
                    break
                at += 8 + n
                done += 1
            self.at = at
            if done < count and at + 8 <= end:
                n = unpack(fmt, buf, at)[0]
                self.at += 8
                if n > self.left():
                    raise self.fail(
                        f"{what}[{done}]: a string of {n} bytes runs past the end of the file",
                        self.offset - 8,
                    )
                self.skip(n, what)
                done += 1


def open_regular(path: str) -> tuple[int, int]:
    """An fd for a regular file and its size; ModelError for anything else."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as exc:
        raise ModelError(f"{path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # a NUL byte in the path
        raise ModelError(f"{shown(path)}: not a usable path ({exc})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelError(f"{path}: not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


__all__ = ["Stream", "open_regular"]
