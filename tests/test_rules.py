"""The seed's rules, as tables of cases, through the Public API (Scout with the built-in plugins)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from structlog.testing import capture_logs

from gpuscout import DeviceComparison, DeviceInfo, Scout
from gpuscout.sizes import GIB, MIB
from gpuscout.testing import ScoutFactory

U, S, D = DeviceComparison.UNIQUE, DeviceComparison.SAME_BACKEND, DeviceComparison.DUPLICATE


def cuda(id: str = "GPU-a", **kw: object) -> DeviceInfo:
    return DeviceInfo(id=id, library="CUDA", **kw)  # type: ignore[arg-type]


def rocm(id: str = "GPU-r", **kw: object) -> DeviceInfo:
    return DeviceInfo(id=id, library="ROCm", **kw)  # type: ignore[arg-type]


def vk(id: str = "0", **kw: object) -> DeviceInfo:
    return DeviceInfo(id=id, library="Vulkan", **kw)  # type: ignore[arg-type]


@pytest.fixture
def scout(scout_with: Callable[..., Scout]) -> Scout:
    return scout_with()


# -- compare -----------------------------------------------------------------------------------

RTX = "NVIDIA GeForce RTX 4090"
COMPARE_CASES = [
    ("different PCI ids", cuda(pci_id="0000:01:00.0"), cuda(pci_id="0000:02:00.0"), U),
    (
        "same PCI id in another case, same library",
        cuda(pci_id="0000:C4:00.0"),
        cuda("GPU-b", pci_id="0000:c4:00.0"),
        S,
    ),
    ("same PCI id, other library", cuda(pci_id="0000:01:00.0"), vk(pci_id="0000:01:00.0"), D),
    (
        "same PCI id beats a different description",
        cuda(pci_id="0000:01:00.0", description="x"),
        vk(pci_id="0000:01:00.0", description="y"),
        D,
    ),
    (
        "different PCI ids beat the heuristic",
        cuda(pci_id="0000:01:00.0", description=RTX, total_memory=24 * GIB),
        vk(pci_id="0000:02:00.0", description=RTX, total_memory=24 * GIB),
        U,
    ),
    (
        "Vulkan twin of a CUDA card",
        cuda(description=RTX, total_memory=24 * GIB),
        vk(description=RTX, total_memory=24 * GIB),
        D,
    ),
    (
        "twin found in either argument order",
        vk(description=RTX, total_memory=24 * GIB),
        cuda(description=RTX, total_memory=24 * GIB),
        D,
    ),
    (
        "twin when only the CUDA side has a PCI id",
        cuda(pci_id="0000:01:00.0", description=RTX, total_memory=24 * GIB),
        vk(description=RTX, total_memory=24 * GIB),
        D,
    ),
    (
        "parenthesised driver text is ignored",
        rocm(description="AMD Radeon RX 7900 XTX", total_memory=24 * GIB),
        vk(description="AMD Radeon RX 7900 XTX (RADV NAVI31)", total_memory=24 * GIB - 200 * MIB),
        D,
    ),
    (
        "memory apart by more than 5 % and 512 MiB",
        cuda(description=RTX, total_memory=24 * GIB),
        vk(description=RTX, total_memory=20 * GIB),
        U,
    ),
    (
        "memory within 512 MiB on a small card",
        cuda(description="Quadro P1000", total_memory=4 * GIB),
        vk(description="Quadro P1000", total_memory=4 * GIB + 500 * MIB),
        D,
    ),
    (
        "memory just past 512 MiB on a small card",
        cuda(description="Quadro P1000", total_memory=4 * GIB),
        vk(description="Quadro P1000", total_memory=4 * GIB + 513 * MIB),
        U,
    ),
    ("unknown memory is never similar", cuda(description=RTX), vk(description=RTX), U),
    (
        "empty Vulkan description",
        cuda(description="", total_memory=GIB),
        vk(description="", total_memory=GIB),
        U,
    ),
    (
        "Vulkan and Metal are not twins by heuristic",
        DeviceInfo(id="0", library="Metal", description="Apple M2", total_memory=GIB),
        vk(description="Apple M2", total_memory=GIB),
        U,
    ),
    (
        "two Vulkan devices are not twins by heuristic",
        vk(description=RTX, total_memory=GIB),
        vk("1", description=RTX, total_memory=GIB),
        U,
    ),
    ("no PCI ids, same id and library", vk("0"), vk("0"), S),
    ("no PCI ids, same id, other libraries", cuda("0"), rocm("0"), U),
    ("one PCI id missing, no heuristic match", cuda(pci_id="0000:01:00.0"), cuda(), U),
]


@pytest.mark.parametrize(
    ("a", "b", "expected"), [c[1:] for c in COMPARE_CASES], ids=[c[0] for c in COMPARE_CASES]
)
def test_compare_follows_the_seed(
    scout: Scout, a: DeviceInfo, b: DeviceInfo, expected: DeviceComparison
) -> None:
    """compare() orders PCI ids, the Vulkan heuristic, then DeviceID, as the seed does."""
    assert scout.compare(a, b) is expected


def test_without_the_vulkan_plugin_twins_stay_unique(scout_with: Callable[..., Scout]) -> None:
    """The duplicate heuristic lives in the Vulkan plugin, not the core."""
    alone = scout_with(builtins=("cuda",))
    assert alone.compare(cuda(description=RTX, total_memory=GIB), vk(description=RTX, total_memory=GIB)) is U


# -- preferred, minimum memory, init validation ------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (cuda(), vk(), True),
        (rocm(), vk(), True),
        (vk(), cuda(), False),
        (DeviceInfo(library="Metal"), vk(), False),
        (cuda(), rocm(), True),
        (DeviceInfo(library="cuda"), vk(), False),
        (DeviceInfo(library="cpu"), vk(), False),
    ],
)
def test_preferred_library_follows_the_seed(
    scout: Scout, a: DeviceInfo, b: DeviceInfo, expected: bool
) -> None:
    """CUDA and ROCm are preferred (exact library names); the other device is ignored."""
    assert scout.preferred(a, b) is expected


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        (DeviceInfo(library="Metal"), 512 * MIB),
        (cuda(), 457 * MIB),
        (rocm(), 457 * MIB),
        (vk(), 457 * MIB),
        (DeviceInfo(library="Unknown"), 457 * MIB),
    ],
)
def test_minimum_memory_follows_the_seed(scout: Scout, device: DeviceInfo, expected: int) -> None:
    """Metal holds back 512 MiB, everything else 457 MiB."""
    assert scout.minimum_memory(device) == expected


def test_metal_reserve_holds_on_any_platform(scout_with: Callable[..., Scout]) -> None:
    """Rule hooks answer for their library whatever platform the Scout targets."""
    assert scout_with(platform="win32").minimum_memory(DeviceInfo(library="Metal")) == 512 * MIB


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        (cuda(), True),
        (rocm(), True),
        (vk(), False),
        (DeviceInfo(library="Metal"), False),
        (DeviceInfo(library="cpu"), False),
    ],
)
def test_init_validation_is_needed_for_cuda_and_rocm(
    scout: Scout, device: DeviceInfo, expected: bool
) -> None:
    """CUDA and ROCm devices are validated in a child; the init env forces deep init."""
    assert scout.needs_init_validation(device) is expected
    assert scout.init_env(device) == ({"GGML_CUDA_INIT": "1"} if expected else None)


# -- flash attention ---------------------------------------------------------------------------

FA_CASES = [
    ("no devices", [], True),
    ("cpu", [DeviceInfo(library="cpu")], True),
    ("Metal by library", [DeviceInfo(library="Metal")], True),
    ("Metal by name", [DeviceInfo(name="Metal", library="Other")], True),
    ("ROCm", [rocm()], True),
    ("Vulkan", [vk()], True),
    ("unknown library", [DeviceInfo(library="Unknown")], False),
    ("CUDA 7.0", [cuda(compute_major=7, compute_minor=0, driver_major=12)], True),
    ("CUDA 7.2 (Xavier)", [cuda(compute_major=7, compute_minor=2, driver_major=12)], False),
    ("CUDA 7.5", [cuda(compute_major=7, compute_minor=5, driver_major=12)], True),
    ("CUDA 6.1", [cuda(compute_major=6, compute_minor=1, driver_major=12)], False),
    ("CUDA unknown compute", [cuda(compute_major=-1, compute_minor=-1, driver_major=12)], False),
    ("CUDA driver major 6", [cuda(compute_major=8, compute_minor=0, driver_major=6)], False),
    ("CUDA driver major 7", [cuda(compute_major=8, compute_minor=0, driver_major=7)], True),
    ("CUDA unknown driver", [cuda(compute_major=8, compute_minor=9, driver_major=0)], True),
    (
        "one bad device fails all",
        [cuda(compute_major=9, driver_major=12), cuda("GPU-b", compute_major=6, driver_major=12)],
        False,
    ),
    ("lower-case cuda is unknown", [DeviceInfo(library="cuda", compute_major=9)], False),
]


@pytest.mark.parametrize(("devices", "expected"), [c[1:] for c in FA_CASES], ids=[c[0] for c in FA_CASES])
def test_flash_attention_follows_the_seed(scout: Scout, devices: list[DeviceInfo], expected: bool) -> None:
    """Every device must pass; CUDA needs CC >= 7 but not 7.2, and a driver >= 7 when known."""
    assert scout.flash_attention_supported(devices) is expected


def test_unknown_cuda_driver_passes_with_a_warning(scout: Scout) -> None:
    """A CUDA device without driver version passes flash attention and logs a warning."""
    with capture_logs() as logs:
        assert scout.flash_attention_supported([cuda(compute_major=8, description="RTX")])
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["rules.cuda_driver_unknown"]


def test_without_plugins_only_cpu_passes_flash_attention(gpuscout_scout: ScoutFactory) -> None:
    """With no plugin answering, cpu passes and any other library fails."""
    bare = gpuscout_scout()
    assert bare.flash_attention_supported([DeviceInfo(library="cpu")])
    assert not bare.flash_attention_supported([DeviceInfo(library="Metal")])
