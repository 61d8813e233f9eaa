"""Devices hidden by a visibility variable: kept out of the list, dropped with their twins in other
libraries, said by ``--explain``, never selected (ollama#16508, ollama#17780).

The NVIDIA machine is the recorded two-H100 box (tests/plugins/cuda/recorded/h100_sxm_x2.json,
replayed through FakeNvmlRecorded); its Vulkan views are constructed from the same cards' values
(NVIDIA's vendor and driver ids, PCI addresses 18:00.0 and 2a:00.0, one 80 GB device-local heap).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import pytest

from gpuscout import DeviceID, DeviceInfo, Discovery, Scout, from_json, to_json
from gpuscout._discovery.merge import merge
from gpuscout._host.isolation import decode_device, encode_device
from gpuscout._machine.context import Context
from gpuscout.plugins.cuda import enumeration as nvml
from gpuscout.plugins.vulkan import enumeration as vk_discover
from gpuscout.plugins.vulkan.loader import ProbeResult, RawDevice
from gpuscout.testing import CliRunner, ScoutFactory

CUDA_FAKES = pathlib.Path(__file__).parent / "plugins" / "cuda" / "conftest.py"
GPU0 = "GPU-5b2c8f41-7e0a-4c3d-9b1e-2f6a8d4c7e90"
GPU1 = "GPU-a1d7e3b2-4f6c-4a8e-8d2b-6c9e1f3a5b07"
RTX4090 = "GPU-7c3e1a9d-2b5f-4e80-b6a4-d1f9c2e8a305"
H100_PCIE = "GPU-e4b8d2f6-1a3c-4b9e-8f7d-3a6c9e2b5d18"
NVIDIA, NVIDIA_DRIVER, DISCRETE = 0x10DE, 4, 2


@functools.cache
def _cuda_fakes() -> Any:
    # --import-mode=importlib: the CUDA tests' conftest (FakeNvmlRecorded) is loaded by path.
    spec = importlib.util.spec_from_file_location("gpuscout_hidden_cuda_fakes", CUDA_FAKES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def vulkan_view(index: int, gpu: dict[str, Any], pci: bool) -> RawDevice:
    """A recorded NVIDIA card as NVIDIA's Vulkan driver lists it (``pci`` False: without
    VK_EXT_pci_bus_info)."""
    total = int(gpu["memory_v1"]["total"])
    return RawDevice(
        index=index,
        name=gpu["name"],
        device_type=DISCRETE,
        vendor_id=NVIDIA,
        device_id=0x2330,
        api_version=(1 << 22) | (3 << 12),
        driver_version=0,
        driver_id=NVIDIA_DRIVER,
        driver_name="NVIDIA",
        storage_16bit=True,
        pci=[0, gpu["pci"]["bus"], 0, 0] if pci else None,
        heaps=[[total, 1]],
        # More free than CUDA says of the card: a surviving twin would rank before it.
        heap_budget=[total],
        heap_usage=[0],
    )


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch, gpuscout_scout: ScoutFactory) -> Callable[..., Scout]:
    """``box(cuda_visible=None, pci=True, recording="h100_sxm_x2")``: the recorded cards through
    the cuda and vulkan plugins with CUDA_VISIBLE_DEVICES set to ``cuda_visible`` (unset for
    None); the Vulkan views carry their PCI ids unless ``pci`` is False."""

    def make(cuda_visible: str | None = None, pci: bool = True, recording: str = "h100_sxm_x2") -> Scout:
        answers = _cuda_fakes().load_recording(recording)
        fake = _cuda_fakes().FakeNvmlRecorded(answers)
        monkeypatch.setattr(nvml, "_load_nvml", lambda context: fake)
        raws = [vulkan_view(i, gpu, pci) for i, gpu in enumerate(answers["gpus"])]

        def probe(context: Context) -> ProbeResult:
            return ProbeResult(devices=raws, library="fake")

        monkeypatch.setattr(vk_discover, "probe", probe)
        env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        if cuda_visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = cuda_visible
        return gpuscout_scout("cuda", "vulkan", env=env, platform=sys.platform)

    return make


def dropped(found: Discovery) -> list[tuple[str, str, str, DeviceID | None]]:
    return [(d.device.library, d.device.pci_id, d.reason, d.duplicate_of) for d in found.dropped]


def test_a_cuda_mask_lists_only_the_card_cuda_sees(box: Callable[..., Scout]) -> None:
    """CUDA_VISIBLE_DEVICES=0 leaves GPU 0, through CUDA, as the only device."""
    assert [(d.library, d.id) for d in box("0").discover().devices] == [("CUDA", GPU0)]


def test_the_card_a_cuda_mask_hides_is_dropped_naming_the_variable(box: Callable[..., Scout]) -> None:
    """GPU 1 is dropped as hidden by CUDA_VISIBLE_DEVICES=0, a twin of nothing."""
    assert ("CUDA", "0000:2a:00.0", "hidden by CUDA_VISIBLE_DEVICES=0", None) in dropped(box("0").discover())


def test_the_vulkan_twin_of_a_hidden_card_is_dropped_with_it(box: Callable[..., Scout]) -> None:
    """GPU 1's Vulkan view (same PCI id) is dropped naming the variable and the hidden card."""
    assert ("Vulkan", "0000:2a:00.0", "hidden by CUDA_VISIBLE_DEVICES=0", DeviceID(GPU1, "CUDA")) in dropped(
        box("0").discover()
    )


def test_the_vulkan_twin_of_the_visible_card_stays_a_plain_duplicate(box: Callable[..., Scout]) -> None:
    """GPU 0's Vulkan view is dropped as an ordinary duplicate of the visible CUDA record."""
    assert ("Vulkan", "0000:18:00.0", "duplicate", DeviceID(GPU0, "CUDA")) in dropped(box("0").discover())


def test_a_twin_without_pci_id_is_matched_by_the_duplicate_heuristics(box: Callable[..., Scout]) -> None:
    """Without VK_EXT_pci_bus_info the Vulkan plugin's heuristic (name and memory) matches the
    H100 PCIe's Vulkan view to that card, which CUDA_VISIBLE_DEVICES=0 hides (the RTX 4090
    sits first on the bus)."""
    found = box("0", pci=False, recording="rtx4090_h100_pcie").discover()
    assert [
        (d.device.name, d.reason, d.duplicate_of) for d in found.dropped if d.device.library == "Vulkan"
    ] == [
        ("NVIDIA GeForce RTX 4090", "duplicate", DeviceID(RTX4090, "CUDA")),
        ("NVIDIA H100 PCIe", "hidden by CUDA_VISIBLE_DEVICES=0", DeviceID(H100_PCIE, "CUDA")),
    ]


def test_env_best_never_names_the_hidden_card(gpuscout_cli: CliRunner, box: Callable[..., Scout]) -> None:
    """`gpuscout env best` gives GPU 0, though GPU 1's Vulkan view reports the most free memory."""
    scout = box("0")
    run = gpuscout_cli(["env", "best"], scout=scout)
    assert run.code == 0, run.err
    assert run.out == f"export CUDA_VISIBLE_DEVICES='{GPU0}'\n"


def test_select_all_never_returns_a_hidden_card(box: Callable[..., Scout]) -> None:
    """Selecting every device gives the visible card alone."""
    assert [d.id for d in box("0").select(["all"])] == [GPU0]


def test_without_a_mask_both_cards_are_listed_through_cuda(box: Callable[..., Scout]) -> None:
    """With CUDA_VISIBLE_DEVICES unset nothing is hidden: both CUDA records, no hidden reason."""
    found = box().discover()
    assert ([d.id for d in found.devices], [d.reason for d in found.dropped]) == (
        [GPU0, GPU1],
        ["duplicate", "duplicate"],
    )


def test_no_dev_files_hides_every_nvidia_card_and_both_vulkan_twins(box: Callable[..., Scout]) -> None:
    """Slurm's CUDA_VISIBLE_DEVICES=NoDevFiles (a job without GPUs) leaves no device at all."""
    found = box("NoDevFiles").discover()
    assert (found.devices, sorted((d.device.library, d.reason) for d in found.dropped)) == (
        [],
        [("CUDA", "hidden by CUDA_VISIBLE_DEVICES=NoDevFiles")] * 2
        + [("Vulkan", "hidden by CUDA_VISIBLE_DEVICES=NoDevFiles")] * 2,
    )


def test_explain_text_says_the_card_and_its_twin_are_hidden(
    gpuscout_cli: CliRunner, box: Callable[..., Scout]
) -> None:
    """`list --explain` names the variable for the hidden card and for its Vulkan twin."""
    scout = box("0")
    run = gpuscout_cli(["list", "--explain"], scout=scout)
    assert run.code == 0, run.err
    out = run.out
    assert f"CUDA {GPU1}: hidden by CUDA_VISIBLE_DEVICES=0" in out
    assert f"Vulkan 1: hidden by CUDA_VISIBLE_DEVICES=0 (the same card as CUDA {GPU1})" in out


def test_explain_json_gives_the_hiding_setting_of_the_card_and_its_twin(
    gpuscout_cli: CliRunner, box: Callable[..., Scout]
) -> None:
    """`list --json --explain` carries reason, duplicate_of and hidden_by for both."""
    scout = box("0")
    run = gpuscout_cli(["list", "--json", "--explain"], scout=scout)
    assert run.code == 0, run.err
    entries = run.json()["explain"]["dropped"]
    hidden = [e for e in entries if e["hidden_by"]]
    assert hidden == [
        {
            "id": GPU1,
            "backend": "CUDA",
            "reason": "hidden by CUDA_VISIBLE_DEVICES=0",
            "duplicate_of": None,
            "hidden_by": "CUDA_VISIBLE_DEVICES=0",
        },
        {
            "id": "1",
            "backend": "Vulkan",
            "reason": "hidden by CUDA_VISIBLE_DEVICES=0",
            "duplicate_of": {"id": GPU1, "backend": "CUDA"},
            "hidden_by": "CUDA_VISIBLE_DEVICES=0",
        },
    ]


# -- the merge rule ------------------------------------------------------------------------------

CUDA_CARD = DeviceInfo(id="GPU-1", library="CUDA", pci_id="0000:2a:00.0", total_memory=8)
VK_CARD = DeviceInfo(id="0", library="Vulkan", pci_id="0000:2a:00.0", total_memory=8)
MTL_GPU = DeviceInfo(id="0", library="Metal", name="Apple M3", integrated=True)
VK_MOLTEN = DeviceInfo(id="0", library="Vulkan", name="Apple M3", integrated=True)


def _cuda_first(a: DeviceInfo, b: DeviceInfo) -> bool:
    return a.library == "CUDA"


def _twins(pairs: Any) -> list[bool]:
    return [{a.library, b.library} == {"Metal", "Vulkan"} for a, b in pairs]


def test_a_vulkan_mask_never_hides_the_card_cuda_shows() -> None:
    """A Vulkan view hidden by GGML_VK_VISIBLE_DEVICES loses to the visible CUDA record: the
    card stays listed, the Vulkan view is a plain duplicate."""
    hidden = VK_CARD.evolve(hidden_by="GGML_VK_VISIBLE_DEVICES=1")
    kept, out = merge([("vulkan", hidden), ("cuda", CUDA_CARD)], None, _cuda_first)
    assert (kept, [(d.reason, d.duplicate_of) for d in out]) == (
        [CUDA_CARD],
        [("duplicate", CUDA_CARD.device_id)],
    )


def test_a_hidden_view_never_wins_a_tie_over_a_visible_twin() -> None:
    """Neither Metal nor Vulkan is preferred: the visible Metal GPU survives its hidden
    MoltenVK view even when that came first."""
    hidden = VK_MOLTEN.evolve(hidden_by="GGML_VK_VISIBLE_DEVICES=1")
    kept, out = merge([("vulkan", hidden), ("metal", MTL_GPU)], _twins, lambda a, b: False)
    assert (kept, [d.reason for d in out]) == ([MTL_GPU], ["duplicate"])


def test_a_twin_of_a_hidden_partition_points_at_a_visible_partition() -> None:
    """A Vulkan view of a card with one visible and one hidden MIG instance stays a plain
    duplicate, of the visible instance."""
    visible = CUDA_CARD.evolve(id="MIG-b")
    hidden = CUDA_CARD.evolve(id="MIG-a", hidden_by="CUDA_VISIBLE_DEVICES=MIG-b")
    kept, out = merge([("cuda", hidden), ("cuda", visible), ("vulkan", VK_CARD)], None, _cuda_first)
    assert (kept, [(d.device.id, d.reason, d.duplicate_of) for d in out]) == (
        [visible],
        [("MIG-a", "hidden by CUDA_VISIBLE_DEVICES=MIG-b", None), ("0", "duplicate", visible.device_id)],
    )


# -- the record on the wire -------------------------------------------------------------------


def test_hidden_by_is_a_wire_key_only_when_set() -> None:
    """``hidden_by`` is written when set and left out when empty, and read back."""
    hidden = CUDA_CARD.evolve(hidden_by="CUDA_VISIBLE_DEVICES=0")
    assert ("hidden_by" in json.loads(to_json(CUDA_CARD)), from_json(to_json(hidden), DeviceInfo)) == (
        False,
        hidden,
    )


def test_a_hidden_device_survives_the_isolation_childs_encoding() -> None:
    """The isolation child's device encoding keeps ``hidden_by``, so an isolated discovery
    drops the same devices as an in-process one."""
    hidden = CUDA_CARD.evolve(hidden_by="CUDA_VISIBLE_DEVICES=0")
    assert decode_device(json.loads(json.dumps(encode_device(hidden))), "[0]") == hidden


def test_a_plugins_device_count_leaves_out_the_devices_it_reports_hidden() -> None:
    """The report counts the devices a plugin found visible, not those it reports hidden."""
    from gpuscout import DeviceInfo, Scout
    from gpuscout.testing import injected

    name, plugin = injected(
        [
            DeviceInfo(id="a", library="Mine", total_memory=1),
            DeviceInfo(id="b", library="Mine", total_memory=1, hidden_by="MINE_VISIBLE=a"),
        ]
    )
    found = Scout(plugins=[name], extra=[(name, plugin)], entry_points=False, env={}).discover()
    assert [d.id for d in found.devices] == ["a"]
    assert found.report(name).devices == 1
