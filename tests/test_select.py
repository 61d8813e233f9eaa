"""Selectors (gpuscout._selection.selectors) over an injected mixed CUDA + MIG + ROCm + Vulkan machine."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout._selection.selectors import NoMatchError, SelectionError, select_devices
from gpuscout.sizes import GIB, MIB

RESERVE = 457 * MIB

A100 = DeviceInfo(
    id="GPU-8932f937-0000-1111-2222-333344445555",
    library="CUDA",
    description="NVIDIA A100",
    filter_id="GPU-8932f937-0000-1111-2222-333344445555",
    uuid="GPU-8932f937-0000-1111-2222-333344445555",
    pci_id="0000:81:00.0",
    total_memory=80 * GIB,
    free_memory=40 * GIB,
)
L4 = DeviceInfo(
    id="GPU-1234abcd-0000-1111-2222-333344445555",
    library="CUDA",
    description="NVIDIA L4",
    filter_id="GPU-1234abcd-0000-1111-2222-333344445555",
    uuid="GPU-1234abcd-0000-1111-2222-333344445555",
    pci_id="0000:01:00.0",
    total_memory=24 * GIB,
    free_memory=20 * GIB,
)
MIG_A = DeviceInfo(
    id="MIG-aaaa1111-0000-1111-2222-333344445555",
    library="CUDA",
    description="NVIDIA H100 MIG 1g.10gb",
    filter_id="MIG-aaaa1111-0000-1111-2222-333344445555",
    uuid="MIG-aaaa1111-0000-1111-2222-333344445555",
    total_memory=10 * GIB,
    free_memory=10 * GIB,
)
MIG_B = MIG_A.evolve(
    id="MIG-aaaa2222-0000-1111-2222-333344445555",
    filter_id="MIG-aaaa2222-0000-1111-2222-333344445555",
    uuid="MIG-aaaa2222-0000-1111-2222-333344445555",
)
MI300 = DeviceInfo(
    id="GPU-5f3c0a1b2c3d4e5f",
    library="ROCm",
    description="AMD Instinct MI300X",
    filter_id="GPU-5f3c0a1b2c3d4e5f",
    uuid="GPU-5f3c0a1b2c3d4e5f",
    pci_id="0000:c4:00.0",
    total_memory=192 * GIB,
    free_memory=60 * GIB,
)
IGPU = DeviceInfo(
    id="0",
    library="Vulkan",
    description="Intel Arc iGPU",
    filter_id="2",
    pci_id="0000:00:02.0",
    integrated=True,
    total_memory=16 * GIB,
    free_memory=8 * GIB,
)
LLVMPIPE = DeviceInfo(
    id="1",
    library="Vulkan",
    description="llvmpipe",
    filter_id="3",
    software=True,
    total_memory=2 * GIB,
    free_memory=2 * GIB,
)

MACHINE = [MI300, A100, L4, MIG_A, MIG_B, IGPU]


class Reserve:
    """The core's default reserve for every device."""

    def minimum_memory(self, device: DeviceInfo) -> int:
        return RESERVE


def ranked() -> list[DeviceInfo]:
    from gpuscout import rank

    return rank(MACHINE)


def pick(*selectors: str) -> list[DeviceInfo]:
    return select_devices(Reserve(), ranked(), list(selectors))


def test_machine_ranks_as_the_table_assumes() -> None:
    """The injected machine ranks MI300X, A100, L4, both MIG instances, then the iGPU."""
    assert ranked() == [MI300, A100, L4, MIG_A, MIG_B, IGPU]


MATCHES = [
    ("a bare integer is a rank position", ["1"], [A100]),
    ("best is rank 0", ["best"], [MI300]),
    ("all is every device", ["all"], [MI300, A100, L4, MIG_A, MIG_B, IGPU]),
    ("a full UUID", ["GPU-1234abcd-0000-1111-2222-333344445555"], [L4]),
    ("a UUID in another case", ["gpu-1234ABCD-0000-1111-2222-333344445555"], [L4]),
    ("a unique UUID prefix", ["GPU-8932"], [A100]),
    ("a four-character prefix", ["GPU-5"], [MI300]),
    ("a MIG UUID prefix", ["MIG-aaaa2"], [MIG_B]),
    ("a PCI id", ["0000:01:00.0"], [L4]),
    ("a PCI id in upper case", ["0000:C4:00.0"], [MI300]),
    ("a PCI id without its domain", ["81:00.0"], [A100]),
    ("library:index without a numbering counts in PCI bus order, not rank", ["cuda:0"], [L4]),
    ("library:index second CUDA device by bus", ["CUDA:1"], [A100]),
    ("library:index puts devices without a PCI id last", ["cuda:2"], [MIG_A]),
    ("library:index for Vulkan", ["vulkan:0"], [IGPU]),
    ("library=NAME any case", ["library=rocm"], [MI300]),
    ("library=NAME selects all of it", ["library=CUDA"], [A100, L4, MIG_A, MIG_B]),
    ("fits counts free memory minus the reserve", ["fits:39GiB"], [MI300, A100]),
    ("fits with decimal units", ["fits:21GB"], [MI300, A100]),
    ("fits with a fraction", ["fits:7.5GiB"], [MI300, A100, L4, MIG_A, MIG_B, IGPU]),
    ("selectors union in rank order", ["vulkan:0", "best", "GPU-8932"], [MI300, A100, IGPU]),
    ("a device picked twice appears once", ["0", "best", "library=rocm"], [MI300]),
    ("commas separate selectors", ["2,0"], [MI300, L4]),
    ("no selectors means all", [], [MI300, A100, L4, MIG_A, MIG_B, IGPU]),
]


@pytest.mark.parametrize(("selectors", "expected"), [c[1:] for c in MATCHES], ids=[c[0] for c in MATCHES])
def test_selector_matches(selectors: list[str], expected: list[DeviceInfo]) -> None:
    """Each selector form picks the documented devices, in rank order."""
    assert pick(*selectors) == expected


ERRORS = [
    ("an unknown short word", ["gpu"], "unknown selector 'gpu': not a device id, and an id prefix"),
    (
        "a prefix that matches nothing",
        ["GPU-ffff"],
        "selector 'GPU-ffff': no device id or UUID equals or starts with it",
    ),
    ("an ambiguous prefix", ["GPU-"], "is ambiguous: it matches 3 devices"),
    ("an ambiguous MIG prefix", ["MIG-aaaa"], "is ambiguous: it matches 2 devices"),
    ("a rank past the end", ["6"], "rank position 6 is out of range (0..5)"),
    ("a library index past the end", ["rocm:1"], "library ROCm has 1 device: rocm:0 ->"),
    ("a library with no devices", ["metal:0"], "no device of library 'metal'"),
    ("library= with no devices", ["library=metal"], "libraries found: CUDA, ROCm, Vulkan"),
    ("library= with no name", ["library="], "library= needs a name"),
    ("a PCI id with no device", ["0000:02:00.0"], "no device at PCI id 0000:02:00.0"),
    ("fits that nothing holds", ["fits:100GiB"], "no device has 100GiB (100.0 GiB) free"),
    (
        "fits without a unit",
        ["fits:24"],
        "selector 'fits:24': '24': a size needs a unit, e.g. 24GiB or 24MiB; bytes are 24B",
    ),
    ("fits with an unknown unit", ["fits:24GiBs"], "selector 'fits:24GiBs': '24GiBs': unknown unit 'GiBs'"),
]


@pytest.mark.parametrize(("selectors", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_selector_is_a_selection_error(selectors: list[str], message: str) -> None:
    """A selector that matches nothing, or several where one is meant, raises SelectionError."""
    with pytest.raises(SelectionError) as info:
        pick(*selectors)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "selector",
    [
        "fits:100GiB",
        "library=metal",
        "metal:0",
        "cuda:9",
        "0000:02:00.0",
        "GPU-ffff",
        "cafe",
        "0xbeef",
        "99",
    ],
)
def test_well_formed_selector_matching_nothing_is_a_no_match_error(selector: str) -> None:
    """A well-formed selector that matches no device raises NoMatchError."""
    with pytest.raises(NoMatchError):
        pick(selector)


@pytest.mark.parametrize(
    "selector",
    [
        "nope",
        "frobnicate",
        "abc",
        "fits:24",
        "library=",
        "MIG-aaaa",
        "nvidia-smi",
    ],
)
def test_malformed_or_ambiguous_selector_is_not_a_no_match_error(selector: str) -> None:
    """A word that is no selector, a malformed size or an ambiguous prefix is SelectionError
    but not NoMatchError."""
    with pytest.raises(SelectionError) as info:
        pick(selector)
    assert not isinstance(info.value, NoMatchError)


def test_best_on_an_empty_machine_is_a_no_match_error() -> None:
    """``best`` with no devices is well-formed and matches nothing."""
    with pytest.raises(NoMatchError):
        select_devices(Reserve(), [], ["best"])


def test_units_are_case_insensitive() -> None:
    """``fits:24gb`` reads as 24 GB (units are names, not bits)."""
    assert pick("fits:24gb") == pick("fits:24GB") == [MI300, A100]


def test_an_empty_selector_is_an_error() -> None:
    """A blank selector is rejected by match_one with the grammar."""
    from gpuscout._selection.selectors import match_one

    with pytest.raises(SelectionError, match="empty selector; expected one of"):
        match_one(" ", ranked(), Reserve())


def test_unmatched_selector_lists_every_device() -> None:
    """The error for an unmatched id names every device with its rank, library and UUID."""
    with pytest.raises(SelectionError) as info:
        pick("GPU-ffff")
    text = str(info.value)
    assert "\n" not in text
    for position, device in enumerate(ranked()):
        assert f"{position}={device.library}" in text
        assert (device.uuid or device.id) in text


def test_ambiguous_prefix_lists_the_candidates() -> None:
    """An ambiguous prefix names the devices it could mean."""
    with pytest.raises(SelectionError) as info:
        pick("MIG-aaaa")
    assert MIG_A.uuid in str(info.value) and MIG_B.uuid in str(info.value)
    assert A100.uuid not in str(info.value)


def test_all_on_an_empty_machine_is_empty() -> None:
    """``all`` may match nothing."""
    assert select_devices(Reserve(), [], ["all"]) == []


def test_best_on_an_empty_machine_is_an_error() -> None:
    """``best`` with no devices says that none were found."""
    with pytest.raises(SelectionError, match="no devices were found"):
        select_devices(Reserve(), [], ["best"])


def test_pci_id_shared_by_two_records_is_ambiguous() -> None:
    """Two records at one PCI address (read from elsewhere, unmerged) need a UUID instead."""
    twin = L4.evolve(id="GPU-other", uuid="GPU-other", filter_id="GPU-other")
    with pytest.raises(SelectionError, match="ambiguous"):
        select_devices(Reserve(), [L4, twin], ["0000:01:00.0"])


def test_fits_holds_exactly_free_memory_minus_the_reserve(scout_with: Callable[..., Scout]) -> None:
    """A device fits SIZE when free - reserve >= SIZE, to the byte (Scout's 457 MiB reserve)."""
    exact = DeviceInfo(id="GPU-exact", library="CUDA", free_memory=GIB + RESERVE)
    short = DeviceInfo(id="GPU-short", library="CUDA", free_memory=GIB + RESERVE - 1, pci_id="0000:02:00.0")
    scout = scout_with([exact, short])
    assert scout.select(["fits:1GiB"]) == [exact]


def test_fits_uses_each_plugins_reserve(scout_with: Callable[..., Scout]) -> None:
    """A Metal device holds back 512 MiB, not 457 MiB."""
    metal = DeviceInfo(id="0", library="Metal", free_memory=GIB + RESERVE)
    scout = scout_with([metal])
    with pytest.raises(SelectionError, match=r"no device has 1GiB \(1\.0 GiB\)"):
        scout.select(["fits:1GiB"])


def test_scout_select_drops_software_devices_by_default(scout_with: Callable[..., Scout]) -> None:
    """Without include_software the llvmpipe device cannot be selected."""
    scout = scout_with([IGPU, LLVMPIPE])
    assert scout.select(["all"]) == [IGPU]
    with pytest.raises(SelectionError, match="out of range"):
        scout.select(["1"])


def test_scout_select_with_software_can_pick_llvmpipe(scout_with: Callable[..., Scout]) -> None:
    """With include_software the software device is ranked last and selectable."""
    scout = scout_with([IGPU, LLVMPIPE])
    assert scout.select(["vulkan:1"], include_software=True) == [LLVMPIPE]


def test_scout_select_accepts_one_string(scout_with: Callable[..., Scout]) -> None:
    """A lone string is one selector, not a sequence of characters."""
    scout = scout_with(MACHINE)
    assert scout.select("best") == [MI300]
