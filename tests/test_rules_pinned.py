"""Rules that a deliberate bug once broke without any test noticing, each pinned here through
the public API: the ROCm ordinal variable's priority, blanks in numeric lists, the layer list's
string at a sum of one, the survivor of a pair that both libraries prefer, the enumerate
deadline, and the command line's scout options."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceInfo, GPULayers, GPULayersList, Scout, hookimpl
from gpuscout.sizes import GIB
from gpuscout.testing import injected, scout_of

ROCM = DeviceInfo(
    id="GPU-4a1b2c3d4e5f6071",
    filter_id="GPU-4a1b2c3d4e5f6071",
    library="ROCm",
    pci_id="0000:c4:00.0",
    total_memory=24 * GIB,
    free_memory=20 * GIB,
)
CUDA = DeviceInfo(
    id="GPU-0e9f4a6b-3c21-4d7e-a5f8-9b2d6e1c4a37",
    library="CUDA",
    pci_id="0000:C4:00.0",
    total_memory=24 * GIB,
    free_memory=20 * GIB,
)


def rocm_env(env: dict[str, str], platform: str = "linux") -> dict[str, str]:
    """The ROCm plugin's visibility env for ROCM alone, under ``env``."""
    return scout_of("rocm", env=env, platform=platform).visible_env([ROCM])


# -- the ROCm numeric variable: HIP_VISIBLE_DEVICES, then GPU_DEVICE_ORDINAL, then CUDA_... ------

ALL_THREE = {"HIP_VISIBLE_DEVICES": "1", "GPU_DEVICE_ORDINAL": "2", "CUDA_VISIBLE_DEVICES": "3"}


@pytest.mark.parametrize(
    ("unset", "chosen", "also"),
    [
        ((), "HIP_VISIBLE_DEVICES", {"GPU_DEVICE_ORDINAL": "0"}),
        (("HIP_VISIBLE_DEVICES",), "GPU_DEVICE_ORDINAL", {"HIP_VISIBLE_DEVICES": "0"}),
        # The seed's CUDA_VISIBLE_DEVICES becomes HIP_VISIBLE_DEVICES (issue 32): HIP reads it
        # first, and the CUDA runtime would take the AMD ordinal for an NVIDIA GPU.
        (("HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"), "HIP_VISIBLE_DEVICES", {}),
    ],
)
def test_linux_ordinal_goes_to_the_first_numeric_variable_in_seed_order(
    unset: tuple[str, ...], chosen: str, also: dict[str, str]
) -> None:
    """On Linux the child's ordinal goes to HIP_, else GPU_DEVICE_ORDINAL, else (where the seed
    writes CUDA_) HIP_ too; the other inherited lists that would index into the child's ROCr
    list get it as well (``also``: a set GPU_DEVICE_ORDINAL, and HIP_VISIBLE_DEVICES when HIP
    would read CUDA's list)."""
    env = {k: v for k, v in ALL_THREE.items() if k not in unset}
    assert rocm_env(env) == {"ROCR_VISIBLE_DEVICES": ROCM.filter_id, chosen: "0", **also}


@pytest.mark.parametrize(
    ("unset", "chosen"),
    [
        ((), "HIP_VISIBLE_DEVICES"),
        (("HIP_VISIBLE_DEVICES",), "GPU_DEVICE_ORDINAL"),
        (("HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"), "HIP_VISIBLE_DEVICES"),
    ],
)
def test_windows_selects_through_the_first_numeric_variable_in_seed_order(
    unset: tuple[str, ...], chosen: str
) -> None:
    """Off Linux the device goes to HIP_, else GPU_DEVICE_ORDINAL (first numeric), and where the
    seed would write CUDA_ to HIP_, which HIP reads first."""
    env = {k: v for k, v in ALL_THREE.items() if k not in unset}
    assert rocm_env(env, platform="win32") == {chosen: ROCM.filter_id}


def test_a_non_numeric_earlier_variable_passes_the_ordinal_on() -> None:
    """A HIP_VISIBLE_DEVICES holding a UUID is not numeric: GPU_DEVICE_ORDINAL gets the seed's
    ordinal (and the inherited HIP list is rewritten to the child's ordinal as well)."""
    env = {"HIP_VISIBLE_DEVICES": "GPU-4a1b", "GPU_DEVICE_ORDINAL": "0"}
    assert rocm_env(env) == {
        "ROCR_VISIBLE_DEVICES": ROCM.filter_id,
        "GPU_DEVICE_ORDINAL": "0",
        "HIP_VISIBLE_DEVICES": "0",
    }


# -- blanks in numeric lists ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0,,1", " 0 , 1 ", "1,", ",2"])
def test_blank_entries_do_not_stop_a_list_being_numeric(value: str) -> None:
    """Empty and space-padded entries are skipped: "0,,1" and " 0 , 1 " are numeric lists (the
    child's ordinal then goes to HIP_VISIBLE_DEVICES, which HIP reads before CUDA's)."""
    assert rocm_env({"CUDA_VISIBLE_DEVICES": value}) == {
        "ROCR_VISIBLE_DEVICES": ROCM.filter_id,
        "HIP_VISIBLE_DEVICES": "0",
    }


@pytest.mark.parametrize("value", [",", " , ", ""])
def test_a_list_of_only_blanks_is_not_numeric(value: str) -> None:
    """A list needs one entry: only blanks leave the seed's ordinal to the next variable,
    CUDA_VISIBLE_DEVICES's, which goes to HIP_VISIBLE_DEVICES (HIP reads it first) and leaves
    CUDA's own list alone."""
    env = {"HIP_VISIBLE_DEVICES": value, "CUDA_VISIBLE_DEVICES": "0"}
    assert rocm_env(env) == {"ROCR_VISIBLE_DEVICES": ROCM.filter_id, "HIP_VISIBLE_DEVICES": "0"}


# -- GPULayersList at a sum of exactly one ---------------------------------------------------------


def test_layer_list_with_one_layer_prints_its_sum() -> None:
    """A sum of one is > 0, so Go prints the sum before the list: ``1[ID:0 Layers:1(5..5)]``."""
    layers = GPULayersList([GPULayers(id="0", library="CUDA", layers=[5])])
    assert str(layers) == "1[ID:0 Layers:1(5..5)]"


def test_layer_list_with_one_layer_and_an_empty_entry_prints_its_sum() -> None:
    """An empty entry prints as nothing, and the sum of one still leads: ``1[ID:0 Layers:1(0..0) ]``."""
    layers = GPULayersList([GPULayers(id="0", library="CUDA", layers=[0]), GPULayers(id="1", library="CUDA")])
    assert str(layers) == "1[ID:0 Layers:1(0..0) ]"


# -- a duplicate pair that both libraries prefer ---------------------------------------------------


@pytest.mark.parametrize(("first", "second"), [(CUDA, ROCM), (ROCM, CUDA)])
def test_when_both_twins_are_preferred_the_earlier_one_survives(
    first: DeviceInfo, second: DeviceInfo
) -> None:
    """CUDA and ROCm both win over anything: of two such twins the one found first is kept."""
    scout = scout_of(
        "cuda",
        "rocm",
        injected([first], "found_first"),
        injected([second], "found_second"),
        env={"CUDA_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""},
    )
    assert scout.preferred(first, second) and scout.preferred(second, first)
    found = scout.discover()
    assert [d.device_id for d in found.devices] == [first.device_id]
    assert [(d.device.device_id, d.duplicate_of) for d in found.dropped] == [
        (second.device_id, first.device_id)
    ]


# -- the enumerate deadline ------------------------------------------------------------------------

LIMIT = 1.0


class Slow:
    """Enumerates for three times the limit (then reports one device, too late)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        """One device after 3 x LIMIT, or at once when released."""
        self.release.wait(3 * LIMIT)
        return [DeviceInfo(id="0", library="Slow")]


def test_a_plugin_three_times_over_its_deadline_costs_about_one_deadline() -> None:
    """A 3x overrun is reported as a timeout after about 1x the limit, not after 3x."""
    slow = Slow()
    scout = scout_of(("slow", slow), enumerate_timeout=LIMIT)
    try:
        start = time.monotonic()
        found = scout.discover()
        took = time.monotonic() - start
    finally:
        slow.release.set()
    report = found.report("slow")
    assert (report.status, found.devices) == ("timeout", [])
    assert took < 2 * LIMIT, f"discover took {took:.2f} s for a {LIMIT} s limit"


# -- the command line's scout options --------------------------------------------------------------


@pytest.fixture
def scouts_built(monkeypatch: pytest.MonkeyPatch) -> list[Scout]:
    """Every Scout built by ``gpuscout.scout.Scout`` in this test (the class stays the real one,
    recorded as it is constructed); only the ROCm plugin is allowed, so nothing real is read."""
    import gpuscout.scout

    built: list[Scout] = []

    class Recorded(gpuscout.scout.Scout):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(gpuscout.scout, "Scout", Recorded)
    monkeypatch.setenv("GPUSCOUT_PLUGINS", "rocm")
    monkeypatch.delenv("GPUSCOUT_DISABLE_PLUGINS", raising=False)
    return built


def test_cli_root_and_timeout_reach_the_default_scout(
    scouts_built: list[Scout], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list --root DIR --timeout 0.7`` without a factory builds a Scout on DIR with 0.7 s."""
    from gpuscout.cli import main

    assert main(["list", "--json", "--root", str(tmp_path), "--timeout", "0.7"]) == 0
    assert [(s.root, s.enumerate_timeout) for s in scouts_built] == [(str(tmp_path), 0.7)]


def test_cli_default_root_and_timeout_reach_the_default_scout(
    scouts_built: list[Scout], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the options the default Scout reads "/" with the 15 s deadline."""
    from gpuscout.cli import main

    assert main(["list", "--json"]) == 0
    assert [(s.root, s.enumerate_timeout) for s in scouts_built] == [("/", 15.0)]
