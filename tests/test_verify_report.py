"""The line `--verify` writes on a match names the devices the child sees, plural right."""

from __future__ import annotations

from gpuscout import DeviceInfo
from gpuscout._selection.verify import compare_views, report
from gpuscout.sizes import GIB

A = DeviceInfo(id="GPU-aaaa", uuid="GPU-aaaa", library="CUDA", description="Card A", total_memory=8 * GIB)
B = DeviceInfo(id="GPU-bbbb", uuid="GPU-bbbb", library="CUDA", total_memory=8 * GIB)


def test_a_match_of_one_device_names_it_in_the_singular() -> None:
    """`the 1 selected device: CUDA GPU-aaaa (Card A)`, not `device(s)`."""
    assert report(compare_views([A], [A])) == (
        "gpuscout: verified: the child sees exactly the 1 selected device: CUDA GPU-aaaa (Card A)\n"
    )


def test_a_match_of_two_devices_names_each_in_the_plural() -> None:
    """Two devices: `devices`, each named, one without a description by its id alone."""
    line = report(compare_views([A, B], [B, A]))
    expected = "gpuscout: verified: the child sees exactly the 2 selected devices: "
    assert line == expected + "CUDA GPU-aaaa (Card A); CUDA GPU-bbbb\n"
