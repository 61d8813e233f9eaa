"""The indexed merge decides exactly as the seed's fold does: each new device meets every
survivor in order, and the first that is not UNIQUE decides."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout import DeviceComparison, DeviceInfo
from gpuscout.merge import DUPLICATE_REASON, is_better, merge
from gpuscout.testing import scout_of

GIB = 1 << 30
UUID = "11111111-2222-3333-4444-555555555555"
SOURCES = {"CUDA": "cuda", "ROCm": "rocm", "Vulkan": "vulkan"}


def reference_fold(
    found: list[tuple[str, DeviceInfo]],
    compare: Callable[[DeviceInfo, DeviceInfo], DeviceComparison],
    preferred: Callable[[DeviceInfo, DeviceInfo], bool],
) -> tuple[list[DeviceInfo], list[tuple[DeviceInfo, str, object]]]:
    """The quadratic fold, written out as the seed's loop (partitions of one plugin kept)."""
    kept: list[tuple[str, DeviceInfo]] = []
    dropped: list[tuple[DeviceInfo, str, object]] = []
    for source, new in found:
        for i, (old_source, old) in enumerate(kept):
            how = compare(old, new)
            if how is DeviceComparison.UNIQUE:
                continue
            if (how is DeviceComparison.SAME_BACKEND and source == old_source
                    and old.device_id != new.device_id):
                continue
            if how is DeviceComparison.DUPLICATE:
                replace = preferred(new, old) and not preferred(old, new)
            else:
                replace = is_better(old, new)
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
        id=draw(st.sampled_from(["a", "b", "c", "GPU-1"])), library=library,
        pci_id=draw(st.sampled_from(["", "", "0000:01:00.0", "0000:01:00.0".upper(), "0000:02:00.0"])),
        description=draw(st.sampled_from(["Acme GPU", "ACME gpu (RADV)", "Other", ""])),
        total_memory=draw(st.sampled_from([0, 8 * GIB, 8 * GIB + (300 << 20), 9 * GIB, 24 * GIB,
                                           25 * GIB, 80 * GIB])),
        uuid=draw(st.sampled_from(["", f"GPU-{UUID}", UUID])),
        library_path=draw(st.sampled_from([(), ("/lib/cuda_v12",), ("/lib/cuda_v13",)])),
    )


# Module level, not a fixture: Hypothesis runs each test many times over one Scout.
SCOUT = scout_of("cuda", "rocm", "vulkan", env={})


@settings(max_examples=600, deadline=None)
@given(st.lists(devices(), max_size=14))
def test_the_indexed_merge_equals_the_seeds_fold(found: list[tuple[str, DeviceInfo]]) -> None:
    """Survivors, dropped devices and their order are those of the quadratic fold."""
    kept, dropped = merge(found, SCOUT.duplicates, SCOUT.preferred, SCOUT.duplicate_keys)
    ref_kept, ref_dropped = reference_fold(found, SCOUT.compare, SCOUT.preferred)
    assert kept == ref_kept
    assert [(d.device, d.reason, d.duplicate_of) for d in dropped] == ref_dropped


@settings(max_examples=300, deadline=None)
@given(st.lists(devices(), max_size=14))
def test_the_merge_without_heuristics_equals_the_fold_without_them(
        found: list[tuple[str, DeviceInfo]]) -> None:
    """With no duplicate heuristic at all, only PCI ids and DeviceIDs decide."""
    kept, dropped = merge(found, None, SCOUT.preferred)
    ref_kept, ref_dropped = reference_fold(
        found, lambda a, b: SCOUT_NO_VULKAN.compare(a, b), SCOUT.preferred)
    assert (kept, [(d.device, d.reason, d.duplicate_of) for d in dropped]) == (ref_kept, ref_dropped)


SCOUT_NO_VULKAN = scout_of("cuda", "rocm", env={})


@settings(max_examples=500, deadline=None)
@given(devices(), devices())
def test_vulkan_twins_always_share_a_duplicate_key(a: tuple[str, DeviceInfo],
                                                   b: tuple[str, DeviceInfo]) -> None:
    """Whenever the Vulkan heuristic calls two devices twins, their keys intersect."""
    (_, x), (_, y) = a, b
    if SCOUT.is_duplicate(x, y):
        kx, ky = SCOUT.duplicate_keys([x, y])
        assert kx & ky


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=1, max_value=2**50), st.floats(min_value=-0.07, max_value=0.07),
       st.integers(min_value=-(1 << 30), max_value=1 << 30))
def test_similar_memory_always_shares_a_bucket(a: int, ratio: float, offset: int) -> None:
    """Two sizes the 5 % / 512 MiB rule accepts always share a memory bucket key."""
    from gpuscout.plugins.vulkan.rules import similar_memory, twin_keys

    b = max(1, int(a * (1 + ratio)) + offset)
    x = DeviceInfo(library="Vulkan", description="Acme", total_memory=a)
    y = DeviceInfo(library="CUDA", description="Acme", total_memory=b)
    if similar_memory(a, b):
        assert twin_keys(x) & twin_keys(y)
