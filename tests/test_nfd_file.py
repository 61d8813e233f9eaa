"""gpuscout.cluster.nfd, continued: the label prefix and the expiry NFD accept, the 64 KB cap,
the atomic write of the feature file, and any devices at all giving a valid, stable file. The
checker (``nfd_file_problems``) and the devices are in tests/test_nfd.py.
"""

from __future__ import annotations

import errno
import os
import random
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscout._records.device import DeviceInfo
from gpuscout.cluster import nfd
from gpuscout.errors import GpuscoutError
from gpuscout.sizes import GIB
from tests.test_nfd import MIXED, labels_of, nfd_file_problems, parse, prefix_problems

# -- prefix -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix",
    [
        "kubernetes.io",
        "node.kubernetes.io",
        "k8s.io",
        "foo.k8s.io",
        "Gpuscout.io",
        "",
        "a" * 64,
        ".".join(["a" * 60] * 5),
        "-x.io",
        "x..io",
        "x.io/",
        "under_score.io",
    ],
)
def test_bad_prefixes_are_refused(prefix: str) -> None:
    """A prefix in a reserved domain, upper case, too long, empty or malformed is refused."""
    assert prefix_problems(prefix)  # the independent checker agrees
    with pytest.raises(GpuscoutError, match="prefix"):
        nfd.check_prefix(prefix)


@pytest.mark.parametrize(
    "prefix",
    [
        "gpuscout.io",
        "feature.node.kubernetes.io",
        "profile.node.kubernetes.io",
        "gpu.feature.node.kubernetes.io",
        "example.com",
        "a",
        "notkubernetes.io",
    ],
)
def test_good_prefixes_are_accepted(prefix: str) -> None:
    """NFD's own domains and ordinary DNS subdomains are accepted, and files with them pass."""
    assert nfd.check_prefix(prefix) == prefix
    assert nfd_file_problems(nfd.render(labels_of(MIXED), prefix=prefix)) == []


# -- expiry -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("1h", 3600),
        ("2h30m", 9000),
        ("1.5h", 5400),
        ("500ms", 0.5),
        ("1h0m0s", 3600),
        (".5s", 0.5),
    ],
)
def test_go_durations_are_read(text: str, seconds: float) -> None:
    """Go-style durations give the right length."""
    assert nfd.parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text", ["", "0", "0s", "1", "h", "1d", "1h 30m", "-1h", "1e3s", "abc", "99999999999999999999h"]
)
def test_bad_durations_are_refused_naming_the_text(text: str) -> None:
    """Garbage, zero, negative and too long durations raise an error naming the text."""
    with pytest.raises(GpuscoutError, match=re.escape(repr(text))):
        nfd.parse_duration(text)


def test_expiry_is_the_first_line_in_rfc3339_utc() -> None:
    """--expiry adds now + duration as '# +expiry-time=' in UTC with a Z."""
    now = datetime(2026, 11, 30, 22, 30, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    text = nfd.render(labels_of([]), expiry=nfd.parse_duration("1h30m"), now=now)
    assert text.splitlines()[0] == "# +expiry-time=2026-11-30T23:00:00Z"
    assert nfd_file_problems(text) == []


# -- size -------------------------------------------------------------------------------------------


def test_a_file_over_64_kb_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """Many models make the file too big: render refuses, write refuses, nothing appears."""
    many = [
        DeviceInfo(id=str(i), library="CUDA", name=f"model {i} " + "x" * 30, total_memory=GIB)
        for i in range(600)
    ]
    with pytest.raises(GpuscoutError, match=r"NFD ignores files over 64\.0 KiB"):
        nfd.render(labels_of(many))
    with pytest.raises(GpuscoutError, match=r"would be 78\.1 KiB; NFD ignores files over 64\.0 KiB"):
        nfd.write(tmp_path, "a.b/c=d\n" * 10000)
    assert os.listdir(tmp_path) == []


# -- writing ----------------------------------------------------------------------------------------


def test_write_puts_the_whole_file_in_place(tmp_path: Path) -> None:
    """The file lands under its name, mode 0644, with the text and no temporary file beside."""
    text = nfd.render(labels_of(MIXED))
    path = nfd.write(tmp_path, text)
    assert path == tmp_path / "gpuscout" and path.read_text() == text
    assert path.stat().st_mode & 0o777 == 0o644
    assert os.listdir(tmp_path) == ["gpuscout"]


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    """A directory that does not exist gives one clear error."""
    with pytest.raises(GpuscoutError, match="nope: no such directory"):
        nfd.write(tmp_path / "nope", "a.b/c=d\n")


def test_a_file_in_place_of_the_directory_is_named(tmp_path: Path) -> None:
    """A regular file given as the directory gives 'not a directory'."""
    (tmp_path / "f").write_text("x")
    with pytest.raises(GpuscoutError, match="not a directory"):
        nfd.write(tmp_path / "f", "a.b/c=d\n")


def test_a_directory_in_place_of_the_file_is_refused(tmp_path: Path) -> None:
    """A directory where the file goes is refused, and left as it is."""
    (tmp_path / "gpuscout").mkdir()
    with pytest.raises(GpuscoutError, match="is a directory"):
        nfd.write(tmp_path, "a.b/c=d\n")
    assert sorted(os.listdir(tmp_path)) == ["gpuscout"]


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    """A link at the target is replaced by the file; what it pointed to is untouched."""
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "gpuscout").symlink_to(victim)
    path = nfd.write(tmp_path / "d", "a.b/c=d\n")
    assert not path.is_symlink() and path.read_text() == "a.b/c=d\n"
    assert victim.read_text() == "keep"


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", ".."])
def test_bad_file_names_are_refused(tmp_path: Path, name: str) -> None:
    """A dot-file (which NFD ignores), an empty name or a path is refused."""
    with pytest.raises(GpuscoutError, match="file name"):
        nfd.write(tmp_path, "a.b/c=d\n", name=name)


@pytest.mark.parametrize(
    ("where", "code", "reason"),
    [
        ("write", errno.ENOSPC, "no space left on device"),
        ("write", errno.EROFS, "read-only file system"),
        ("fsync", errno.EIO, "input/output error"),
        ("replace", errno.EACCES, "permission denied"),
    ],
)
def test_a_failure_removes_the_temporary_file_and_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, code: int, reason: str
) -> None:
    """An error while writing, syncing or renaming leaves the old file and no temporary file."""
    (tmp_path / "gpuscout").write_text("old\n")

    calls = []

    def fail(*args: Any) -> Any:
        calls.append(args)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, where, fail)
    with pytest.raises(GpuscoutError, match=f"{re.escape(str(tmp_path))}: {reason}$"):
        nfd.write(tmp_path, "a.b/c=new\n")
    monkeypatch.undo()
    assert calls  # the failure was met, not skipped
    assert os.listdir(tmp_path) == ["gpuscout"]
    assert (tmp_path / "gpuscout").read_text() == "old\n"


def test_an_interrupt_while_writing_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the write propagates, and the old file stays alone in the directory."""
    (tmp_path / "gpuscout").write_text("old\n")

    def interrupt(*args: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        nfd.write(tmp_path, "a.b/c=new\n")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["gpuscout"]
    assert (tmp_path / "gpuscout").read_text() == "old\n"


# -- any devices at all -----------------------------------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=120)
_DEVICES = st.lists(
    st.builds(
        DeviceInfo,
        id=st.text(max_size=8),
        library=st.one_of(
            st.sampled_from(["CUDA", "ROCm", "Metal", "Vulkan", "cuda", "Cuda!", *sorted(nfd.NODE_WORDS)]),
            _TEXT,
        ),
        name=_TEXT,
        description=_TEXT,
        integrated=st.booleans(),
        total_memory=st.integers(0, 2**63 - 1),
        compute_major=st.integers(-1, 200),
        compute_minor=st.integers(-1, 300),
        driver_major=st.integers(0, 10**6),
        driver_minor=st.integers(0, 10**6),
        nvidia_driver_major=st.integers(0, 10**6),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devices=_DEVICES, flash=st.booleans(), seed=st.randoms(use_true_random=False))
def test_any_devices_give_a_valid_stable_file(
    devices: list[DeviceInfo], flash: bool, seed: random.Random
) -> None:
    """Whatever names, libraries and numbers the drivers report: the file passes the rules (or
    is refused as too big, never written invalid), keys stay unique, and the bytes do not depend
    on the order the devices came in."""
    try:
        text = nfd.render(labels_of(devices, lambda d: flash))
    except GpuscoutError as exc:
        assert "NFD ignores files over 64.0 KiB" in str(exc)
        return
    assert nfd_file_problems(text) == []
    shuffled = list(devices)
    seed.shuffle(shuffled)
    assert nfd.render(labels_of(shuffled, lambda d: flash)) == text
    got = parse(text)
    assert got["gpuscout.io/devices"] == str(len(devices))
    assert got["gpuscout.io/integrated.count"] == str(sum(d.integrated for d in devices))
    counts = [int(v) for k, v in got.items() if k.endswith(".count") and ".model." in k]
    assert sum(counts) == len(devices)
