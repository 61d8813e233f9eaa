"""The indexed merge decides exactly as the seed's fold does: each new device meets every
survivor in order, and the first that is not UNIQUE decides."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout import DeviceComparison, DeviceInfo
from gpuscout._discovery.merge import merge
from gpuscout._records.results import DUPLICATE_REASON
from gpuscout.sizes import GIB
from gpuscout.testing import scout_of

UUID = "11111111-2222-3333-4444-555555555555"
SOURCES = {"CUDA": "cuda", "ROCm": "rocm", "Vulkan": "vulkan"}


def _words(text: str) -> str:
    """The seed's normalizeDeviceDescription, written out: lower case, (...) removed, other
    characters one space (an unmatched ``)`` vanishes)."""
    out, depth = "", 0
    for ch in text.strip().lower():
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif depth:
            pass
        elif ch.isascii() and ch.isalnum():
            out += ch
        else:
            out += " "
    return " ".join(out.split())


def _uuid(text: str) -> str:
    """The 32 hex digits of a whole-GPU UUID, with or without ``GPU-`` and dashes; else ""."""
    digits = text.lower().removeprefix("gpu-").replace("-", "")
    return digits if len(digits) == 32 and all(c in "0123456789abcdef" for c in digits) else ""


def seed_twins(a: DeviceInfo, b: DeviceInfo) -> bool:
    """A Vulkan device and a CUDA/ROCm one: the same UUID (the Vulkan plugin's rule), or the
    seed's likelyVulkanDuplicate (same words, memory within max(5 %, 512 MiB), both non-zero)."""
    vulkan = [d for d in (a, b) if d.library == "Vulkan"]
    other = [d for d in (a, b) if d.library in ("CUDA", "ROCm")]
    if len(vulkan) != 1 or len(other) != 1:
        return False
    v, o = vulkan[0], other[0]
    if _uuid(v.uuid) and _uuid(v.uuid) == _uuid(o.uuid):
        return True
    if not _words(v.description) or _words(v.description) != _words(o.description):
        return False
    big, small = max(v.total_memory, o.total_memory), min(v.total_memory, o.total_memory)
    return small > 0 and big - small <= max(big // 20, 512 << 20)


def seed_compare(a: DeviceInfo, b: DeviceInfo, twins: bool = True) -> DeviceComparison:
    """The seed's DeviceInfo.Compare, line by line (``twins``: with the duplicate heuristic)."""
    if a.pci_id and b.pci_id:
        if a.pci_id.lower() != b.pci_id.lower():
            return DeviceComparison.UNIQUE
        return DeviceComparison.SAME_BACKEND if a.library == b.library else DeviceComparison.DUPLICATE
    if twins and seed_twins(a, b):
        return DeviceComparison.DUPLICATE
    if a.pci_id != b.pci_id or a.device_id != b.device_id:
        return DeviceComparison.UNIQUE
    return DeviceComparison.SAME_BACKEND if a.library == b.library else DeviceComparison.DUPLICATE


def seed_is_better(a: DeviceInfo, b: DeviceInfo) -> bool:
    """The seed's IsBetter for ``cuda_vN`` paths: b's variant is newer (gpuscout compares the
    numbers as numbers, v9 < v12); no path is never better."""
    if not a.library_path or not b.library_path:
        return False
    va, vb = (int(d.library_path[-1].rsplit("_v", 1)[1]) for d in (a, b))
    return vb > va


def seed_preferred(a: DeviceInfo, b: DeviceInfo) -> bool:
    """The seed's PreferredLibrary: CUDA and ROCm over anything else."""
    return a.library in ("CUDA", "ROCm")


def reference_fold(
    found: list[tuple[str, DeviceInfo]],
    twins: bool = True,
) -> tuple[list[DeviceInfo], list[tuple[DeviceInfo, str, object]]]:
    """The quadratic fold, written out as the seed's loop (partitions of one plugin kept)."""
    kept: list[tuple[str, DeviceInfo]] = []
    dropped: list[tuple[DeviceInfo, str, object]] = []
    for source, new in found:
        for i, (old_source, old) in enumerate(kept):
            how = seed_compare(old, new, twins)
            if how is DeviceComparison.UNIQUE:
                continue
            if (
                how is DeviceComparison.SAME_BACKEND
                and source == old_source
                and old.device_id != new.device_id
            ):
                continue
            if how is DeviceComparison.DUPLICATE:
                replace = seed_preferred(new, old) and not seed_preferred(old, new)
            else:
                replace = seed_is_better(old, new)
            if replace:
                kept[i] = (source, new)
                dropped.append((old, DUPLICATE_REASON, new.device_id))
            else:
                dropped.append((new, DUPLICATE_REASON, old.device_id))
            break
        else:
            kept.append((source, new))
    return [d for _, d in kept], dropped


@st.composite
def devices(draw: st.DrawFn) -> tuple[str, DeviceInfo]:
    library = draw(st.sampled_from(["CUDA", "ROCm", "Vulkan"]))
    source = SOURCES[library] if draw(st.booleans()) else "other"
    return source, DeviceInfo(
        id=draw(st.sampled_from(["a", "b", "c", "GPU-1"])),
        library=library,
        pci_id=draw(st.sampled_from(["", "", "0000:01:00.0", "0000:01:00.0".upper(), "0000:02:00.0"])),
        description=draw(st.sampled_from(["Acme GPU", "ACME gpu (RADV)", "Other", ""])),
        total_memory=draw(
            st.sampled_from([0, 8 * GIB, 8 * GIB + (300 << 20), 9 * GIB, 24 * GIB, 25 * GIB, 80 * GIB])
        ),
        uuid=draw(st.sampled_from(["", f"GPU-{UUID}", UUID])),
        library_path=draw(st.sampled_from([(), ("/lib/cuda_v9",), ("/lib/cuda_v12",), ("/lib/cuda_v13",)])),
    )


# Module level, not a fixture: Hypothesis runs each test many times over one Scout.
SCOUT = scout_of("cuda", "rocm", "vulkan", env={})


@settings(max_examples=600, deadline=None)
@given(st.lists(devices(), max_size=14))
def test_the_indexed_merge_equals_the_seeds_fold(found: list[tuple[str, DeviceInfo]]) -> None:
    """Survivors, dropped devices and their order are those of the quadratic fold."""
    kept, dropped = merge(found, SCOUT.duplicates, SCOUT.preferred, SCOUT.duplicate_keys)
    ref_kept, ref_dropped = reference_fold(found)
    assert kept == ref_kept
    assert [(d.device, d.reason, d.duplicate_of) for d in dropped] == ref_dropped


@settings(max_examples=300, deadline=None)
@given(st.lists(devices(), max_size=14))
def test_the_merge_without_heuristics_equals_the_fold_without_them(
    found: list[tuple[str, DeviceInfo]],
) -> None:
    """With no duplicate heuristic at all, only PCI ids and DeviceIDs decide."""
    kept, dropped = merge(found, None, SCOUT.preferred)
    ref_kept, ref_dropped = reference_fold(found, twins=False)
    assert (kept, [(d.device, d.reason, d.duplicate_of) for d in dropped]) == (ref_kept, ref_dropped)


@settings(max_examples=500, deadline=None)
@given(devices(), devices())
def test_vulkan_twins_always_share_a_duplicate_key(
    a: tuple[str, DeviceInfo], b: tuple[str, DeviceInfo]
) -> None:
    """Whenever the Vulkan heuristic calls two devices twins, their keys intersect."""
    (_, x), (_, y) = a, b
    if SCOUT.is_duplicate(x, y):
        kx, ky = SCOUT.duplicate_keys([x, y])
        assert kx & ky


@settings(max_examples=500, deadline=None)
@given(
    st.integers(min_value=1, max_value=2**50),
    st.floats(min_value=-0.07, max_value=0.07),
    st.integers(min_value=-(1 << 30), max_value=1 << 30),
)
def test_similar_memory_always_shares_a_bucket(a: int, ratio: float, offset: int) -> None:
    """Two sizes the 5 % / 512 MiB rule accepts always share a memory bucket key."""
    from gpuscout.plugins.vulkan.rules import similar_memory, twin_keys

    b = max(1, int(a * (1 + ratio)) + offset)
    x = DeviceInfo(library="Vulkan", description="Acme", total_memory=a)
    y = DeviceInfo(library="CUDA", description="Acme", total_memory=b)
    if similar_memory(a, b):
        assert twin_keys(x) & twin_keys(y)
