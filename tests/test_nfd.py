"""gpuscout.cluster.nfd: the labels of a node, the feature file NFD reads, and its atomic write.

Every file produced here is read back by ``nfd_file_problems``, a checker written from the
Kubernetes label rules (k8s.io/apimachinery ``IsQualifiedName``, ``IsValidLabelValue``,
``IsDNS1123Subdomain``) and NFD's local-source rules, independent of the module under test.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pytest

from gpuscout._records.device import DeviceInfo
from gpuscout.cluster import nfd
from gpuscout.errors import GpuscoutError
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
