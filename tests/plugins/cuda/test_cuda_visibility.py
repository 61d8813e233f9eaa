"""CUDA_VISIBLE_DEVICES table: every case of the CUDA guide, as the pure parser reads it."""

from __future__ import annotations

import pytest

from gpuscout.plugins.cuda.visibility import GpuSlot, MigSlot, parse_index, visible_uuids

G0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
G1 = "GPU-8932aa01-5b3c-4e2d-8f1a-9c7b6d5e4f30"
G2 = "GPU-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9"
M0 = "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"
M1 = "MIG-2a7b9e4d-8c13-5f6e-a0d2-7e4b1c9f3a58"
G3 = "GPU-9d4e6b2a-5c8f-4a1d-b3e7-6f2a8c1d4e95"

PLAIN = [GpuSlot(G0), GpuSlot(G1), GpuSlot(G2)]
WITH_MIG = [
    GpuSlot(G0),
    GpuSlot(G3, mig_enabled=True, mig=(MigSlot(M0, 1, 0), MigSlot(M1, 5, 0))),
]

PLAIN_CASES = [
    # (CUDA_VISIBLE_DEVICES, devices CUDA shows, why)
    (None, [G0, G1, G2], "unset shows every GPU"),
    ("", [], "empty shows none"),
    ("-1", [], "-1 is invalid and ends the list at once"),
    ("0", [G0], "one index"),
    ("2,1", [G2, G1], "list order is the new numbering"),
    ("0,2,-1,1", [G0, G2], "the first invalid entry ends the list"),
    ("1gpu2,2ampere", [G1, G2], "indices are read like strtoul"),
    (" 1", [G1], "strtoul skips leading blanks"),
    ("+1", [G1], "strtoul takes a plus sign"),
    ("-0", [G0], "minus zero is zero for strtoul"),
    ("3", [], "an index past the last GPU is invalid"),
    ("0,3,1", [G0], "an index past the last GPU ends the list"),
    ("abc", [], "no leading digits is invalid"),
    ("0,,1", [G0], "an empty entry ends the list"),
    ("0,0", [], "a GPU named twice selects nothing"),
    ("1,GPU-8932aa01", [], "an index and a UUID naming one GPU select nothing"),
    (G2, [G2], "a full UUID"),
    ("GPU-8932f937", [G0], "a unique UUID prefix"),
    ("GPU-1f2e,0", [G2, G0], "a UUID prefix and an index mix"),
    ("GPU-8932", [], "an ambiguous prefix is invalid"),
    ("0,GPU-ffff,1", [G0], "a UUID that names no GPU ends the list"),
    ("GPU-8932F937", [], "UUIDs match case-sensitively"),
    ("MIG-c6d4", [], "a MIG id with no GPU in MIG mode is invalid"),
]

MIG_CASES = [
    (None, [G0, M0, M1], "unset shows every instance of a GPU in MIG mode"),
    (M1, [M1], "a MIG UUID"),
    ("MIG-c6d4", [M0], "a unique MIG UUID prefix"),
    ("MIG-", [], "an ambiguous MIG prefix is invalid"),
    (f"MIG-{G3}/5/0", [M1], "the older MIG-GPU-uuid/gi/ci form"),
    (f"MIG-{G3}/2/0", [], "the older form naming no instance is invalid"),
    ("1", [M0, M1], "an index of a GPU in MIG mode selects its instances"),
    (G3[:12], [M0, M1], "a UUID of a GPU in MIG mode selects its instances"),
    (f"{M0},0", [M0, G0], "MIG ids and indices mix"),
    (f"{M0},1", [], "an instance named twice selects nothing"),
    ("MIG-ffff,0", [], "a MIG id naming no instance ends the list"),
]


@pytest.mark.parametrize(("value", "expected", "why"), PLAIN_CASES, ids=[c[2] for c in PLAIN_CASES])
def test_visible_devices_on_plain_gpus(value: str | None, expected: list[str], why: str) -> None:
    """CUDA_VISIBLE_DEVICES selects the GPUs the CUDA guide says, in its order."""
    assert visible_uuids(value, PLAIN) == expected


@pytest.mark.parametrize(("value", "expected", "why"), MIG_CASES, ids=[c[2] for c in MIG_CASES])
def test_visible_devices_with_mig(value: str | None, expected: list[str], why: str) -> None:
    """CUDA_VISIBLE_DEVICES selects MIG instances by id, old form, index or parent UUID."""
    assert visible_uuids(value, WITH_MIG) == expected


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("0", 0),
        ("12", 12),
        ("7x", 7),
        ("  3", 3),
        ("+2", 2),
        ("-0", 0),
        ("-1", 2**64 - 1),
        ("", None),
        ("x1", None),
        ("-", None),
        ("GPU-1", None),
    ],
)
def test_index_entries_read_like_strtoul(entry: str, expected: int | None) -> None:
    """parse_index reads the leading number as strtoul would, None without one."""
    assert parse_index(entry) == expected


def test_the_older_mig_form_names_a_compute_instance_within_its_gpu_instance() -> None:
    """MIG-GPU-uuid/gi/ci names one compute instance: two compute instances of GPU instance 1
    (ci 0 and ci 1) are told apart by the last number, and a ci the GI lacks names none."""
    m2 = "MIG-5e1d3c7a-9b2f-5a4e-8c6d-0f1e2d3c4b5a"
    gpus = [GpuSlot(G3, mig_enabled=True, mig=(MigSlot(M0, 1, 0), MigSlot(m2, 1, 1)))]
    assert (
        visible_uuids(f"MIG-{G3}/1/1", gpus),
        visible_uuids(f"MIG-{G3}/1/0", gpus),
        visible_uuids(f"MIG-{G3}/1/2", gpus),
    ) == ([m2], [M0], [])
