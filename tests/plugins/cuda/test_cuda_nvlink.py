"""NVLink peers from NVML's per-link state: a link to another GPU's PCI address, or GPUs that
share NVSwitches (all to all); no NVLink, NOT_SUPPORTED or a failing link mean no peer."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from gpuscout._records.fields import PeerLink
from gpuscout.plugins.cuda.nvlink import (
    REMOTE_GPU,
    REMOTE_NPU,
    REMOTE_SWITCH,
    LinkReading,
    peer_map,
    read_links,
)
from gpuscout.plugins.cuda.replay import ReplayedNvml

if TYPE_CHECKING:
    from tests.plugins.cuda.conftest import CudaScout, FakeNvml, Recording

A, B = "GPU-5b2c8f41-7e0a-4c3d-9b1e-2f6a8d4c7e90", "GPU-a1d7e3b2-4f6c-4a8e-8d2b-6c9e1f3a5b07"


REMOTE_UNKNOWN_TYPE = 0xFF


def link(bus: int, kind: int = REMOTE_GPU, state: Any = 1) -> dict[str, Any]:
    """One NVLink as NVML answers it: active, ending at the device on ``bus``."""
    return {
        "state": state,
        "remote": {"busId": f"00000000:{bus:02X}:00.0", "domain": 0, "bus": bus, "device": 0},
        "type": kind,
    }


def two_h100s(recording: Recording, links_a: Any, links_b: Any) -> dict[str, Any]:
    """The recorded 2 x H100 SXM with the given NVLink answers per GPU."""
    data = copy.deepcopy(recording("h100_sxm_x2"))
    if links_a is not None:
        data["gpus"][0]["nvlink"] = links_a
    if links_b is not None:
        data["gpus"][1]["nvlink"] = links_b
    return data


def peers_of(cuda_scout: CudaScout) -> dict[str, tuple[PeerLink, ...]]:
    return {d.id: d.peers for d in cuda_scout(env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).discover().devices}


def test_a_link_to_the_other_gpus_address_makes_them_peers(
    recording: Recording, fake_nvml: FakeNvml, cuda_scout: CudaScout
) -> None:
    """Links of GPU 0 end at GPU 1 (bus 0x2a): each names the other, kind nvlink."""
    fake_nvml(two_h100s(recording, [link(0x2A)] * 4, [{"state": 0}] * 4))
    peers = peers_of(cuda_scout)
    assert peers[A] == (PeerLink(B, "CUDA", "nvlink"),)
    assert peers[B] == (PeerLink(A, "CUDA", "nvlink"),)


def test_gpus_on_nvswitches_are_peers_all_to_all(
    recording: Recording, fake_nvml: FakeNvml, cuda_scout: CudaScout
) -> None:
    """An HGX board: every link ends at an NVSwitch, so every GPU reaches every other."""
    switch = [link(0xC5, REMOTE_SWITCH)] * 18
    fake_nvml(two_h100s(recording, switch, switch))
    peers = peers_of(cuda_scout)
    assert [p.id for p in peers[A]] == [B] and [p.id for p in peers[B]] == [A]


def test_no_nvlink_means_no_peers(recording: Recording, fake_nvml: FakeNvml, cuda_scout: CudaScout) -> None:
    """PCIe cards: NVML says NotSupported (or nothing was recorded), and no peer is named."""
    fake_nvml(two_h100s(recording, {"error": "NotSupported"}, None))
    assert peers_of(cuda_scout) == {A: (), B: ()}


def test_inactive_failing_or_foreign_links_name_no_peer(
    recording: Recording, fake_nvml: FakeNvml, cuda_scout: CudaScout
) -> None:
    """An inactive link, a link whose state NVML refuses, a link to a POWER CPU (NPU) and one
    to an address no GPU has are no peers."""
    odd = [
        {"state": 0},
        {"state": {"error": "Unknown"}},
        link(0x2A, REMOTE_NPU),
        link(0x77),
        {"state": 1, "remote": {"error": "NotSupported"}, "type": {"error": "NotSupported"}},
    ]
    fake_nvml(two_h100s(recording, odd, odd))
    assert peers_of(cuda_scout) == {A: (), B: ()}


def test_a_peer_hidden_by_cuda_visible_devices_is_not_named(
    recording: Recording, fake_nvml: FakeNvml, cuda_scout: CudaScout
) -> None:
    """Only devices of the same discovery are peers: the hidden GPU is left out."""
    fake_nvml(two_h100s(recording, [link(0x2A)], [link(0x18)]))
    (device,) = cuda_scout(env={"CUDA_VISIBLE_DEVICES": A}).discover().devices
    assert device.id == A and device.peers == ()


def test_the_walk_stops_at_the_first_link_past_the_end() -> None:
    """INVALID_ARGUMENT after the last link ends the walk: only existing links are read."""
    nv = ReplayedNvml({"gpus": [{"name": "x", "uuid": A, "nvlink": [link(0x2A), {"state": 0}, link(0x2A)]}]})
    links = read_links(nv, nv.nvmlDeviceGetHandleByIndex(0))
    assert links == (LinkReading("0000:2a:00.0", REMOTE_GPU),) * 2


def test_a_bindings_module_without_nvlink_calls_reads_no_links() -> None:
    """Old bindings without nvmlDeviceGetNvLinkState: no links, no error."""

    class FakeOldBindings:
        class NVMLError(Exception):
            pass

    assert read_links(FakeOldBindings(), object()) == ()


def test_the_peer_map_is_symmetric_and_never_names_a_gpu_itself() -> None:
    """One side's link is enough for both; a link back to itself is ignored."""
    peers = peer_map(
        [
            ("a", "0000:18:00.0", [LinkReading("0000:2a:00.0", REMOTE_GPU), LinkReading("0000:18:00.0")]),
            ("b", "0000:2a:00.0", []),
            ("c", "0000:3a:00.0", [LinkReading("0000:99:00.0", REMOTE_UNKNOWN_TYPE)]),
        ]
    )
    assert peers == {"a": ("b",), "b": ("a",)}


def test_a_recording_captures_the_nvlink_answers_it_replays() -> None:
    """capture() records each link's answers so that a replay reads the same links."""
    from gpuscout.plugins.cuda.replay import capture

    live = ReplayedNvml(
        {
            "driver": {"kernel": "550.54.15", "cuda": 12040},
            "gpus": [
                {
                    "name": "H100",
                    "uuid": A,
                    "pci": {"busId": "00000000:18:00.0", "domain": 0, "bus": 24, "device": 0},
                    "compute": [9, 0],
                    "mig_mode": [0, 0],
                    "nvlink": [link(0x2A), {"state": 0}, link(0xC5, REMOTE_SWITCH)],
                },
            ],
        }
    )
    recorded = capture(live)
    again = ReplayedNvml(recorded)
    handle = again.nvmlDeviceGetHandleByIndex(0)
    assert read_links(again, handle) == read_links(live, live.nvmlDeviceGetHandleByIndex(0))
    assert len(recorded["gpus"][0]["nvlink"]) == 3


def test_an_unused_link_in_the_middle_is_skipped_not_the_end() -> None:
    """NOT_SUPPORTED on a later link skips that link; the links after it still count."""
    nvlink = [link(0x2A), {"state": {"error": "NotSupported"}}, link(0x3B)]
    nv = ReplayedNvml({"gpus": [{"name": "x", "uuid": A, "nvlink": nvlink}]})
    links = read_links(nv, nv.nvmlDeviceGetHandleByIndex(0))
    assert [x.remote for x in links] == ["0000:2a:00.0", "0000:3b:00.0"]
