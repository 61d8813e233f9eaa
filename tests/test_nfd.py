"""gpuscout.cluster.nfd: the labels of a node, the feature file NFD reads, and its atomic write.

Every file produced here is read back by ``nfd_file_problems``, a checker written from the
Kubernetes label rules (k8s.io/apimachinery ``IsQualifiedName``, ``IsValidLabelValue``,
``IsDNS1123Subdomain``) and NFD's local-source rules, independent of the module under test.
"""

from __future__ import annotations

import errno
import os
import random
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscout.cluster import nfd
from gpuscout.errors import GpuscoutError
from gpuscout.records import DeviceInfo
from gpuscout.scout import Scout
from gpuscout.sizes import GIB, MIB

# -- the checker: Kubernetes' and NFD's rules, written out here --------------------------------------

#: k8s.io/apimachinery/pkg/util/validation: qualifiedNameFmt, labelValueFmt, dns1123LabelFmt.
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
EXPIRY = re.compile(r"^# \+expiry-time=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d))$")


def prefix_problems(prefix: str) -> list[str]:
    """Why ``prefix`` is not a label prefix NFD accepts from a feature file ([] when it is)."""
    problems = []
    if not prefix or len(prefix) > 253:
        problems.append(f"prefix {prefix!r}: length {len(prefix)} not in 1..253")
    for part in prefix.split("."):
        if len(part) > 63 or not DNS1123_LABEL.match(part):
            problems.append(f"prefix {prefix!r}: {part!r} is not an RFC 1123 label")
    reserved = any(prefix == d or prefix.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    nfd_own = any(
        prefix == d or prefix.endswith("." + d)
        for d in ("feature.node.kubernetes.io", "profile.node.kubernetes.io")
    )
    if reserved and not nfd_own:
        problems.append(f"prefix {prefix!r} is in a Kubernetes-reserved domain")
    return problems


def nfd_file_problems(text: str) -> list[str]:
    """Every way ``text`` breaks the rules of an NFD local feature file ([] when none)."""
    problems = []
    if len(text.encode("utf-8")) > 65536:
        problems.append(f"{len(text.encode())} bytes, NFD reads at most 65536")
    if not text.endswith("\n"):
        problems.append("the last line has no newline")
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            match = EXPIRY.match(line)
            if number != 1 or not match:
                problems.append(f"line {number}: unexpected comment {line!r}")
            else:
                datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))
            continue
        key, sep, value = line.partition("=")
        prefix, slash, name = key.rpartition("/")
        if not sep or not slash:
            problems.append(f"line {number}: not <prefix>/<name>=<value>: {line!r}")
            continue
        problems += [f"line {number}: {p}" for p in prefix_problems(prefix)]
        if len(name) > 63 or not QUALIFIED_NAME.match(name):
            problems.append(f"line {number}: bad label name {name!r}")
        if len(value) > 63 or not LABEL_VALUE.match(value):
            problems.append(f"line {number}: bad label value {value!r}")
        keys.append(key)
    if len(set(keys)) != len(keys):
        problems.append("a label appears twice")
    if keys != sorted(keys):
        problems.append("labels are not sorted")
    return problems


def parse(text: str) -> dict[str, str]:
    """The labels of a feature file (prefix kept), after checking it against the rules."""
    assert nfd_file_problems(text) == []
    return dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))


# -- devices ----------------------------------------------------------------------------------------


def cuda(
    n: int, name: str = "NVIDIA H100 80GB HBM3", memory: int = 80 * GIB, compute: tuple[int, int] = (9, 0)
) -> DeviceInfo:
    return DeviceInfo(
        id=f"GPU-{name[:6]}-{n}",
        library="CUDA",
        name=name,
        pci_id=f"0000:{n + 16:02x}:00.0",
        total_memory=memory,
        free_memory=memory,
        compute_major=compute[0],
        compute_minor=compute[1],
        driver_major=12,
        driver_minor=4,
        nvidia_driver_major=550,
    )


ROCM = DeviceInfo(
    id="0",
    library="ROCm",
    name="AMD Instinct MI300X",
    pci_id="0000:c1:00.0",
    total_memory=192 * GIB,
    free_memory=192 * GIB,
    compute_major=9,
    compute_minor=0x42,
    driver_major=6,
    driver_minor=8,
)
VULKAN = DeviceInfo(
    id="0",
    library="Vulkan",
    name="AMD Radeon Graphics (RADV GFX1103_R1)",
    pci_id="0000:e5:00.0",
    integrated=True,
    total_memory=512 * MIB,
    free_memory=512 * MIB,
    compute_major=-1,
    compute_minor=-1,
    driver_major=1,
    driver_minor=3,
)
MIXED = [cuda(0), cuda(1), cuda(2, "NVIDIA A100-SXM4-40GB", 40 * GIB, (8, 0)), ROCM, VULKAN]


def file_of(scout: Scout, **render: Any) -> str:
    """The feature file ``scout``'s discovery gives."""
    return nfd.render(nfd.labels(scout.discover(), scout), **render)


def labels_of(
    devices: Sequence[DeviceInfo], flash: Callable[[DeviceInfo], bool] = lambda d: True
) -> dict[str, str]:
    return nfd.device_labels(devices, flash, ["cuda", "rocm", "metal", "vulkan"])


# -- label content ----------------------------------------------------------------------------------


def test_empty_node_still_says_zero_devices(scout_with: Callable[..., Scout]) -> None:
    """A node without accelerators gets devices=0 and a zero count for every built-in library."""
    got = parse(file_of(scout_with([])))
    assert got["gpuscout.io/devices"] == "0"
    assert {got[f"gpuscout.io/{lib}.count"] for lib in ("cuda", "rocm", "metal", "vulkan")} == {"0"}
    assert got["gpuscout.io/memory.total-mib"] == "0"
    assert got["gpuscout.io/homogeneous"] == "false"
    assert "gpuscout.io/memory.smallest-mib" not in got
    assert got["gpuscout.io/discovery.problems"] == "0"


def test_one_cuda_model_gets_library_and_model_labels(scout_with: Callable[..., Scout]) -> None:
    """Two H100s give counts, memory, compute, driver and model labels under cuda."""
    got = parse(file_of(scout_with([cuda(0), cuda(1)])))
    want = {
        "devices": "2",
        "cuda.count": "2",
        "cuda.memory.total-mib": "163840",
        "cuda.memory.smallest-mib": "81920",
        "cuda.compute.min": "9.0",
        "cuda.compute.max": "9.0",
        "cuda.driver.min": "12.4",
        "cuda.driver.max": "12.4",
        "cuda.nvidia-driver": "550",
        "cuda.flash-attention": "true",
        "cuda.integrated.count": "0",
        "cuda.model.nvidia-h100-80gb-hbm3.count": "2",
        "cuda.model.nvidia-h100-80gb-hbm3.memory-mib": "81920",
        "homogeneous": "true",
        "memory.smallest-mib": "81920",
        "rocm.count": "0",
        "vulkan.count": "0",
    }
    assert {k: got[f"gpuscout.io/{k}"] for k in want} == want


def test_mixed_node_keeps_one_key_per_model(scout_with: Callable[..., Scout]) -> None:
    """Two CUDA models, a ROCm and a Vulkan device each get model keys of their own."""
    got = parse(file_of(scout_with(MIXED)))
    assert got["gpuscout.io/cuda.model.nvidia-h100-80gb-hbm3.count"] == "2"
    assert got["gpuscout.io/cuda.model.nvidia-a100-sxm4-40gb.count"] == "1"
    assert got["gpuscout.io/cuda.compute.min"] == "8.0"
    assert got["gpuscout.io/cuda.compute.max"] == "9.0"
    assert got["gpuscout.io/rocm.compute.min"] == "gfx942"
    assert got["gpuscout.io/rocm.model.amd-instinct-mi300x.memory-mib"] == str(192 * 1024)
    assert got["gpuscout.io/vulkan.model.amd-radeon-graphics-radv-gfx1103-r1.count"] == "1"
    assert got["gpuscout.io/vulkan.integrated.count"] == "1"
    assert "gpuscout.io/vulkan.compute.min" not in got
    assert got["gpuscout.io/homogeneous"] == "false"
    assert got["gpuscout.io/devices"] == "5"
    assert got["gpuscout.io/memory.smallest-mib"] == "512"


def test_devices_named_by_position_are_keyed_by_their_description() -> None:
    """ROCm names devices ROCm0, ROCm1 and puts the model in the description (as Ollama's
    runner does): the model key comes from the description, so two MI300X are one model."""
    cards = [
        DeviceInfo(
            id=f"GPU-{i}",
            library="ROCm",
            name=f"ROCm{i}",
            description="AMD Instinct MI300X",
            total_memory=192 * GIB,
        )
        for i in range(2)
    ]
    got = labels_of(cards)
    assert got["rocm.model.amd-instinct-mi300x.count"] == "2"
    assert not [k for k in got if "rocm0" in k or "rocm1" in k]
    assert got["homogeneous"] == "true"


def test_flash_attention_is_true_only_when_every_device_of_the_library_has_it() -> None:
    """One device without flash attention makes its library's label false."""
    got = labels_of(MIXED, flash=lambda d: d.compute_major != 8)
    assert got["cuda.flash-attention"] == "false"
    assert got["rocm.flash-attention"] == "true"


def test_other_libraries_get_labels_of_their_own() -> None:
    """A third-party library is counted under its own slug next to the built-in ones."""
    got = labels_of([DeviceInfo(id="0", library="Acme NPU!", name="X1", total_memory=GIB)])
    assert got["acme-npu.count"] == "1" and got["cuda.count"] == "0"


def test_unknown_driver_and_compute_are_left_out() -> None:
    """A driver of 0.0 and a compute of -1 give no range labels."""
    got = labels_of(
        [
            DeviceInfo(
                id="0", library="Metal", name="Apple M2", compute_major=-1, compute_minor=-1, total_memory=GIB
            )
        ]
    )
    assert not [k for k in got if ".driver." in k or ".compute." in k]


def test_failed_plugins_are_counted_as_problems(gpuscout_scout: Any, hidden_machine: None) -> None:
    """A plugin that raises makes discovery.problems 1, so its count of 0 is not taken as none."""
    from gpuscout.plugin import hookimpl

    class Broken:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> Any:
            raise RuntimeError("driver crashed")

    got = parse(file_of(gpuscout_scout("cuda", ("broken", Broken()))))
    assert got["gpuscout.io/discovery.problems"] == "1"
    assert got["gpuscout.io/devices"] == "0"


# -- sanitizing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        'NVIDIA "H100" $(rm -rf /)',
        "Ünïcødé GPU ★",
        "x" * 200,
        "",
        "---",
        "日本語",
        "a=b\nc/d#e",
    ],
)
def test_hostile_model_names_give_valid_labels(name: str) -> None:
    """Quotes, shell syntax, unicode, line breaks, 200 characters and empty names stay valid."""
    text = nfd.render(labels_of([DeviceInfo(id="0", library="CUDA", name=name, total_memory=GIB)]))
    assert nfd_file_problems(text) == []
    assert len([line for line in text.splitlines() if ".model." in line]) == 2


def test_long_names_are_shortened_with_a_hash_of_the_full_name() -> None:
    """Two 200-character names differing at the end get distinct, stable shortened keys."""
    a, b = "A" * 199 + "1", "A" * 199 + "2"
    got = labels_of([DeviceInfo(id="0", library="CUDA", name=a), DeviceInfo(id="1", library="CUDA", name=b)])
    models = sorted(k for k in got if k.endswith(".count") and ".model." in k)
    assert len(models) == 2 and all(len(k) <= 63 for k in got)
    assert models == sorted(
        k
        for k in labels_of([DeviceInfo(library="CUDA", name=b), DeviceInfo(library="CUDA", name=a)])
        if k.endswith(".count") and ".model." in k
    )


def test_names_that_slug_alike_do_not_collide() -> None:
    """ "RTX 4090" and "rtx-4090" get two keys, each with a hash, and a count of 1 each."""
    got = labels_of(
        [
            DeviceInfo(id="0", library="CUDA", name="RTX 4090"),
            DeviceInfo(id="1", library="CUDA", name="rtx-4090"),
        ]
    )
    counts = {k: v for k, v in got.items() if ".model." in k and k.endswith(".count")}
    assert len(counts) == 2 and set(counts.values()) == {"1"}
    assert all(re.search(r"\.rtx-4090-[0-9a-f]{8}\.count$", k) for k in counts)


def test_a_library_that_slugs_like_a_builtin_does_not_take_its_key() -> None:
    """A library "cuda!" keeps cuda.count for the built-in and gets a hashed slug."""
    got = labels_of([DeviceInfo(id="0", library="cuda!", name="X")])
    assert got["cuda.count"] == "0"
    assert [
        k
        for k in got
        if k.startswith("cuda-") and k.endswith(".count") and ".model." not in k and ".integrated." not in k
    ]


def _node_wide(got: dict[str, str]) -> dict[str, str]:
    """The labels of ``got`` that no library's slug starts (built-ins and hashed ones)."""
    return {k: v for k, v in got.items() if k.split(".")[0] in nfd.NODE_WORDS}


def test_every_node_wide_label_starts_with_a_node_word() -> None:
    """NODE_WORDS holds the first word of every node-wide label, with devices or without."""
    for devices in ([], MIXED):
        got = labels_of(devices)
        libraries = {d.library.lower() for d in devices} | {"cuda", "rocm", "metal", "vulkan"}
        firsts = {k.split(".")[0] for k in got if k.split(".")[0] not in libraries}
        assert firsts <= nfd.NODE_WORDS and "integrated" in firsts


HOSTILE_LIBRARIES = [
    *sorted(nfd.NODE_WORDS),
    "Integrated",
    "INTEGRATED",
    "integrated!",
    " integrated ",
    "memory.total-mib",
    "discovery.problems",
    "integrated.count",
    "Devices",
    "version 2",
    "homogeneous?",
]


@pytest.mark.parametrize("library", HOSTILE_LIBRARIES)
def test_a_library_named_like_a_node_wide_word_keeps_its_own_count(library: str) -> None:
    """A library called ``integrated`` (or ``memory``, ``devices``, ...) gets a count of its own
    (under a hashed slug when it slugs to a node word); the node-wide labels keep the node's."""
    mine = [DeviceInfo(id=str(i), library=library, name="X", total_memory=GIB) for i in range(3)]
    got = labels_of([*MIXED, *mine])
    builtins = {"cuda", "rocm", "metal", "vulkan"}
    own = [
        k
        for k in got
        if re.fullmatch(r"[a-z0-9-]+\.count", k) and k.split(".")[0] not in builtins | nfd.NODE_WORDS
    ]
    assert [got[k] for k in own] == ["3"]
    if nfd.slug(library) in nfd.NODE_WORDS:
        assert re.fullmatch(rf"{nfd.slug(library)}-[0-9a-f]{{8}}\.count", own[0])
    assert _node_wide(got) == {
        **_node_wide(labels_of(MIXED)),
        "devices": "8",
        "memory.total-mib": str(401920 + 3 * 1024),
        "homogeneous": "false",
    }
    assert got["integrated.count"] == "1"


def test_two_libraries_named_after_node_words_do_not_share_a_key() -> None:
    """``integrated`` and ``Integrated!`` each get a count, and the node's stays the node's."""
    got = labels_of(
        [
            DeviceInfo(id="0", library="integrated", name="X", integrated=True),
            DeviceInfo(id="1", library="Integrated!", name="Y"),
            DeviceInfo(id="2", library="Integrated!", name="Y"),
        ]
    )
    counts = sorted(v for k, v in got.items() if re.fullmatch(r"integrated-[0-9a-f]{8}\.count", k))
    assert counts == ["1", "2"] and got["integrated.count"] == "1" and got["devices"] == "3"


def test_an_invalid_version_is_sanitized_and_an_empty_one_refused() -> None:
    """A value with characters outside the rules is cleaned; one with none left fails loudly."""
    assert nfd.sanitize_value("version", "1.0+dirty build") == "1.0-dirty-build"
    with pytest.raises(GpuscoutError, match=r"'version'.*'\+\+'"):
        nfd.sanitize_value("version", "++")


def test_render_refuses_an_invalid_label() -> None:
    """A label name or value that breaks the rules is refused, naming it."""
    with pytest.raises(GpuscoutError, match="bad name"):
        nfd.render({"bad name": "1"})
    with pytest.raises(GpuscoutError, match=r"'x'.*'a b'"):
        nfd.render({"x": "a b"})


# -- determinism ------------------------------------------------------------------------------------


def test_the_same_devices_give_the_same_bytes_in_any_order(scout_with: Callable[..., Scout]) -> None:
    """Discovery twice and the devices shuffled give byte-identical files."""
    first = file_of(scout_with(MIXED))
    assert file_of(scout_with(MIXED)) == first
    shuffled = list(MIXED)
    random.Random(7).shuffle(shuffled)
    assert file_of(scout_with(shuffled)) == first
    assert nfd.render(labels_of(shuffled)) == nfd.render(labels_of(MIXED))


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
    with pytest.raises(GpuscoutError, match="65536"):
        nfd.render(labels_of(many))
    with pytest.raises(GpuscoutError, match="65536"):
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
        assert "65536" in str(exc)
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
