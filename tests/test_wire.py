"""Wire format: Ollama's /info keys, omit-when-empty rules, fixed order, path-naming errors."""

from __future__ import annotations

import json
from collections.abc import Callable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscout import (
    BackendMemory,
    DeviceID,
    DeviceInfo,
    DeviceMemory,
    GPULayers,
    GPULayersList,
    GpuscoutError,
    SystemInfo,
    from_json,
    to_json,
)
from gpuscout._records.cpulist import cpulist
from gpuscout._records.fields import PcieLink, PeerLink
from gpuscout._records.results import Discovery, PluginStatus
from gpuscout.scout import Scout
from gpuscout.sizes import GIB

# Shaped like a real runner's /info reply: Go writes every key it knows, extra keys may appear.
RUNNER_INFO = """[
 {"id":"GPU-452cac9f-6960-839c-4fb3-0cec83699196","backend":"CUDA","name":"CUDA0",
  "description":"NVIDIA GeForce RTX 4090","filter_id":"","integration":false,
  "pci_id":"0000:01:00.0","total_memory":25757220864,"free_memory":25048383488,
  "ComputeMajor":8,"ComputeMinor":9,"driver_major":12,"driver_minor":8,
  "LibraryPath":["/usr/lib/ollama","/usr/lib/ollama/cuda_v12"]},
 {"id":"0","backend":"Vulkan","name":"Vulkan0","description":"AMD Radeon Graphics (RADV GFX1103_R1)",
  "filter_id":"1","integration":true,"total_memory":4294967296,"ComputeMajor":-1,
  "ComputeMinor":-1,"LibraryPath":null,"some_future_key":{"x":1}}
]"""

FULL = DeviceInfo(
    id="GPU-1",
    library="CUDA",
    name="CUDA0",
    description="NVIDIA H100",
    filter_id="GPU-1",
    integrated=True,
    pci_id="0000:01:00.0",
    total_memory=80,
    free_memory=70,
    compute_major=9,
    compute_minor=0,
    driver_major=12,
    driver_minor=4,
    nvidia_driver_major=580,
    gfx_target="gfx942",
    library_path=["/a"],
    runner_env_overrides={"K": "V"},
)


def test_a_runner_info_reply_reads_into_records() -> None:
    """The runner's array reads field by field; null LibraryPath and unknown keys are fine."""
    devices: list[DeviceInfo] = from_json(RUNNER_INFO, list[DeviceInfo])
    cuda, vulkan = devices
    assert cuda.id == "GPU-452cac9f-6960-839c-4fb3-0cec83699196" and cuda.library == "CUDA"
    assert (cuda.compute, cuda.driver, cuda.free_memory) == ("8.9", "12.8", 25048383488)
    assert cuda.library_path == ("/usr/lib/ollama", "/usr/lib/ollama/cuda_v12")
    assert vulkan.integrated and vulkan.filter_id == "1" and vulkan.library_path == ()
    assert (vulkan.compute_major, vulkan.free_memory) == (-1, 0)


def test_all_keys_are_written_in_the_runner_order() -> None:
    """A full record writes exactly the wire keys, in Go's field order."""
    assert list(json.loads(to_json(FULL))) == [
        "id",
        "backend",
        "name",
        "description",
        "filter_id",
        "integration",
        "pci_id",
        "total_memory",
        "free_memory",
        "ComputeMajor",
        "ComputeMinor",
        "driver_major",
        "driver_minor",
        "gfx_target",
        "LibraryPath",
    ]


def test_empty_fields_are_omitted_as_go_does() -> None:
    """Starred keys vanish when empty; LibraryPath is null; the rest always appear."""
    assert json.loads(to_json(DeviceInfo())) == {
        "id": "",
        "name": "",
        "description": "",
        "total_memory": 0,
        "ComputeMajor": 0,
        "ComputeMinor": 0,
        "LibraryPath": None,
    }


def test_internal_fields_never_reach_the_wire() -> None:
    """RunnerEnvOverrides and NVIDIADriverMajor are not serialized."""
    text = to_json(FULL)
    assert "580" not in text and "K" not in json.loads(text)


def test_extra_fields_appear_only_when_set() -> None:
    """uuid, free_memory_unknown and software are written when non-empty."""
    data = json.loads(to_json(DeviceInfo(uuid="u", free_memory_unknown=True, software=True)))
    assert (data["uuid"], data["free_memory_unknown"], data["software"]) == ("u", True, True)


def test_a_full_record_round_trips_without_internal_fields() -> None:
    """Reading what was written gives the record back, less the never-serialized fields."""
    assert from_json(to_json(FULL), DeviceInfo) == FULL.evolve(nvidia_driver_major=0, runner_env_overrides={})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"id":"a"},{"id":"b"},{"total_memory":"abc"}]', "[2].total_memory: expected int, got 'abc'"),
        ('[{"ComputeMajor":1.5}]', "[0].ComputeMajor: expected int, got 1.5"),
        ('[{"integration":"yes"}]', "[0].integration: expected bool, got 'yes'"),
        ('[{"LibraryPath":["/a", 3]}]', "[0].LibraryPath: expected str, got 3"),
        ('[{"id": 7}]', "[0].id: expected str, got 7"),
        ('{"id":"x"}', "$: expected list, got dict"),
        ("[1]", "[0]: expected object, got 1"),
        ('[{"free_memory":-1}]', "free_memory must be >= 0"),
        ("[{", "not valid JSON"),
    ],
)
def test_bad_input_names_the_path_and_problem(text: str, message: str) -> None:
    """Malformed input raises GpuscoutError naming where and what."""
    with pytest.raises(GpuscoutError) as err:
        from_json(text, list[DeviceInfo])
    assert message in str(err.value)


def test_device_id_wire_keys() -> None:
    """DeviceID writes id and backend, backend omitted when empty."""
    assert to_json(DeviceID("0", "CUDA")) == '{"id":"0","backend":"CUDA"}'
    assert to_json(DeviceID("0")) == '{"id":"0"}'


def test_system_info_omits_zeros() -> None:
    """SystemInfo keys are omitted when zero, as the seed's omitempty."""
    assert to_json(SystemInfo(total_memory=8, free_memory=4)) == ('{"total_memory":8,"free_memory":4}')
    assert from_json("{}", SystemInfo) == SystemInfo()


def test_memory_records_use_the_seed_keys() -> None:
    """BackendMemory and DeviceMemory write the seed's exported Go names."""
    memory = BackendMemory(
        input_weights=1,
        cpu=DeviceMemory(id="cpu", name="CPU", weights=[2]),
        gpus=[DeviceMemory(id="0", library="CUDA", name="CUDA0", graph=3)],
    )
    data = json.loads(to_json(memory))
    assert list(data) == ["InputWeights", "CPU", "GPUs"]
    assert data["GPUs"][0] == {
        "id": "0",
        "backend": "CUDA",
        "Name": "CUDA0",
        "Weights": None,
        "Cache": None,
        "Graph": 3,
    }
    assert from_json(to_json(memory), BackendMemory) == memory


def test_gpu_layers_use_the_seed_keys_and_read_back_as_a_list() -> None:
    """GPULayers writes id, backend, Layers; a list reads back as a GPULayersList."""
    layers = GPULayersList([GPULayers("0", "CUDA", [1, 2])])
    assert to_json(layers) == '[{"id":"0","backend":"CUDA","Layers":[1,2]}]'
    back: list[GPULayers] = from_json(to_json(layers), list[GPULayers])
    assert isinstance(back, GPULayersList) and back == layers


names = st.text(max_size=12)
sizes = st.integers(min_value=0, max_value=2**64 - 1)


@given(
    st.builds(
        DeviceInfo,
        id=names,
        library=names,
        name=names,
        description=names,
        filter_id=names,
        integrated=st.booleans(),
        pci_id=names,
        total_memory=sizes,
        free_memory=sizes,
        compute_major=st.integers(-1, 20),
        compute_minor=st.integers(-1, 20),
        driver_major=st.integers(0, 999),
        gfx_target=names,
        library_path=st.lists(names, max_size=3),
        uuid=names,
        software=st.booleans(),
        max_allocation=sizes,
        notes=st.lists(names, max_size=3),
        numa_node=st.integers(-1, 65535),
        local_cpus=st.lists(st.integers(0, 9999), max_size=6).map(cpulist),
        pcie_link=st.none()
        | st.builds(
            PcieLink,
            speed=st.sampled_from([0.0, 2.5, 5.0, 8.0, 16.0, 32.0, 64.0]),
            width=st.integers(0, 64),
            max_speed=st.floats(0, 1024, allow_nan=False),
            max_width=st.integers(0, 64),
        ),
        peers=st.lists(
            st.builds(PeerLink, id=names, library=names, link=st.sampled_from(["nvlink", "xgmi"]))
        ),
    )
)
def test_any_record_round_trips(device: DeviceInfo) -> None:
    """Every serializable record reads back equal."""
    assert from_json(to_json([device]), list[DeviceInfo]) == [device]


def test_a_device_s_notes_are_a_list_on_the_wire_and_left_out_when_there_are_none() -> None:
    """``notes`` is gpuscout's own key: a JSON list of sentences, omitted when empty."""
    noted = DeviceInfo(id="0", library="CUDA", notes=["WSL2: NVML from /usr/lib/wsl/lib"])
    assert json.loads(to_json(noted))["notes"] == ["WSL2: NVML from /usr/lib/wsl/lib"]
    assert "notes" not in json.loads(to_json(DeviceInfo(id="0", library="CUDA")))


def test_notes_that_are_not_sentences_are_refused_at_the_border() -> None:
    """A plugin's notes must be a few strings: a non-str item or too many are a RecordError."""
    from gpuscout._records.device import check_device
    from gpuscout._records.fields import RecordError

    with pytest.raises(RecordError, match=r"\.notes\[1\]: expected str"):
        check_device(attrs.evolve(DeviceInfo(id="0"), notes=("ok", 3)), "")
    with pytest.raises(RecordError, match=r"\.notes: 33 notes, at most 32"):
        check_device(DeviceInfo(id="0", notes=["n"] * 33), "")


def test_a_discovery_serializes_as_the_cli_document() -> None:
    """to_json(Discovery) is the `gpuscout list --json` object, keys in the documented order."""
    from gpuscout import Discovery, Dropped, PluginReport

    found = Discovery(
        devices=[DeviceInfo(id="GPU-1", library="CUDA", total_memory=8)],
        dropped=[Dropped(DeviceInfo(id="0", library="Vulkan"), "duplicate", DeviceID("GPU-1", "CUDA"))],
        system=SystemInfo(total_memory=16),
        plugins=[PluginReport(name="cuda", devices=1, elapsed=0.0012345)],
    )
    doc = json.loads(to_json(found))
    assert list(doc) == ["devices", "dropped", "system", "plugins"]
    assert doc["system"] == {"total_memory": 16, "free_memory": 0, "free_swap": 0}
    assert doc["dropped"][0]["duplicate_of"] == {"id": "GPU-1", "backend": "CUDA"}
    assert doc["plugins"][0] == {
        "name": "cuda",
        "version": "",
        "distribution": "",
        "hooks": [],
        "status": "ok",
        "error": "",
        "note": "",
        "devices": 1,
        "elapsed_ms": 1.234,
    }


H100 = DeviceInfo(
    id="GPU-1111",
    library="CUDA",
    name="CUDA0",
    description="NVIDIA H100 80GB HBM3",
    pci_id="0000:19:00.0",
    total_memory=80 * GIB,
    free_memory=79 * GIB,
    compute_major=9,
)
VK_H100 = DeviceInfo(
    id="0",
    filter_id="0",
    library="Vulkan",
    description="NVIDIA H100 80GB HBM3",
    pci_id="0000:19:00.0",
    total_memory=80 * GIB,
    free_memory=79 * GIB,
)
RTX = DeviceInfo(
    id="GPU-aaaa",
    library="CUDA",
    name="CUDA1",
    description="NVIDIA GeForce RTX 4090",
    total_memory=24 * GIB,
    free_memory=23 * GIB,
    compute_major=8,
    compute_minor=9,
)
LAVAPIPE = DeviceInfo(
    id="4",
    filter_id="5",
    library="Vulkan",
    description="llvmpipe",
    software=True,
    total_memory=2 * GIB,
    free_memory=2 * GIB,
)


def test_a_list_json_document_reads_back_into_the_discovery(scout_with: Callable[..., Scout]) -> None:
    """``from_json(to_json(found), Discovery)`` is ``found``, but for the two times the document
    does not carry exactly: the discovery's own ``elapsed`` (not on it: reads as 0.0) and each
    plugin's ``elapsed`` (written as ms rounded to 3 decimals: read back to the microsecond)."""
    found = scout_with([H100, VK_H100, LAVAPIPE, RTX]).discover()
    assert found.dropped and found.plugins and any(r.elapsed for r in found.plugins)
    text = to_json(found)
    back: Discovery = from_json(text, Discovery)
    assert back.elapsed == 0.0
    for mine, theirs in zip(found.plugins, back.plugins, strict=True):
        assert theirs.elapsed == pytest.approx(mine.elapsed, abs=1e-6)
        theirs.elapsed = mine.elapsed
    assert back == attrs.evolve(found, elapsed=0.0)
    assert to_json(back) != "" and json.loads(to_json(back))["devices"] == json.loads(text)["devices"]


def test_a_listing_with_explain_reads_and_bad_parts_name_their_path() -> None:
    """The ``explain`` key is ignored; a bad value deep in the document names its path."""
    doc = {
        "devices": [json.loads(to_json(FULL))],
        "dropped": [],
        "system": {"total_memory": 1, "free_memory": 0, "free_swap": 0},
        "plugins": [{"name": "cuda", "hooks": ["gpuscout_enumerate"], "status": "ok", "elapsed_ms": 1.5}],
        "explain": {"criteria": []},
    }
    found: Discovery = from_json(json.dumps(doc), Discovery)
    assert found.plugins[0].elapsed == 0.0015 and found.plugins[0].status is PluginStatus.OK
    assert found.devices[0].id == FULL.id and found.dropped == [] and found.elapsed == 0.0
    doc["plugins"][0]["status"] = "fine"  # type: ignore[index]
    with pytest.raises(GpuscoutError, match=r"^plugins\[0\]\.status: expected one of ok"):
        from_json(json.dumps(doc), Discovery)
    doc["plugins"] = []
    doc["devices"][0]["total_memory"] = "80"  # type: ignore[index]
    with pytest.raises(GpuscoutError, match=r"^devices\[0\]\.total_memory: expected int"):
        from_json(json.dumps(doc), Discovery)
