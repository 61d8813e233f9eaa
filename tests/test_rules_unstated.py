"""Rules no test stated (issue 35), each found by a bug nobody listed: a visibility answer past
the selection, what a recording keeps of a path and of a secret-looking variable, ggml-vulkan's
tie between two drivers of one GPU, the chain of replaced records behind a hidden device, and
a recorded file of exactly the size limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuscout import DeviceID, DeviceInfo, Scout
from gpuscout._discovery.hidden import set_aside
from gpuscout._discovery.merge import merge
from gpuscout._machine.context import MAX_READ_BYTES, Context, EnvEntry
from gpuscout._recording.record import SECRET_NAME, Recorder, TrackedEnv
from gpuscout._recording.replay import MANIFEST, MAX_ANSWER_BYTES, MAX_MANIFEST_BYTES, load
from gpuscout._records.results import Dropped
from gpuscout.plugin import hookimpl
from gpuscout.plugins.vulkan.default_set import DRIVER_MESA_RADV, DRIVER_NVIDIA_PROPRIETARY, ggml_default_set
from gpuscout.plugins.vulkan.loader import RawDevice
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory, write_tree

CARD = DeviceInfo(id="GPU-1", library="CUDA", pci_id="0000:01:00.0", total_memory=8 * GIB)
CARD2 = DeviceInfo(id="GPU-2", library="CUDA", pci_id="0000:02:00.0", total_memory=8 * GIB)

# -- visibility: a position past the selection is the plugin's failure -------------------------


class Answers:
    """A plugin whose visibility answer is ``entries`` (positions into the selection)."""

    def __init__(self, *entries: tuple[int, str, str]) -> None:
        self.entries = [EnvEntry(*e) for e in entries]

    @hookimpl
    def gpuscout_visible_env(self, selection: Any, context: Any) -> Any:
        return self.entries


def _status(scout: Scout, name: str) -> tuple[str, str]:
    report = next(r for r in scout.reports if r.name == name)
    return str(report.status), report.error


@pytest.mark.parametrize("position", [2, 3, -1], ids=["one-past", "two-past", "negative"])
def test_a_visibility_answer_past_the_selection_fails_that_plugin_not_the_call(
    gpuscout_scout: ScoutFactory, position: int
) -> None:
    """A plugin naming position len(selection) (or beyond, or below 0) fails, with the entry in
    its error; visible_env still answers with the other plugins' variables, never IndexError."""
    s = gpuscout_scout("cuda", ("liar", Answers((position, "ACME_VISIBLE", "x"))), env={})
    assert s.visible_env([CARD, CARD2]) == {"CUDA_VISIBLE_DEVICES": "GPU-1,GPU-2"}
    status, error = _status(s, "liar")
    assert status == "failed" and "out of range" in error and str(position) in error


def test_a_visibility_answer_at_the_last_position_is_taken(gpuscout_scout: ScoutFactory) -> None:
    """Position len(selection) - 1 is the last device of the selection: its value is used."""
    s = gpuscout_scout(("acme", Answers((0, "ACME", "a"), (1, "ACME", "b"))), env={})
    assert s.visible_env([CARD, CARD2]) == {"ACME": "a,b"}
    assert _status(s, "acme")[0] == "ok"


# -- recording: a read beats a lookup or a listing ---------------------------------------------


class ListsThenReads:
    """Looks ``memory`` up and lists its folder, then reads it (or reads first, with ``first``)."""

    __name__ = "mine"

    def __init__(self, read_first: bool) -> None:
        self.read_first = read_first

    @hookimpl
    def gpuscout_enumerate(self, context: Context) -> list[DeviceInfo]:
        card = "/sys/class/mine/card0"
        if self.read_first:
            total = context.read_u64(f"{card}/memory")
        context.path(f"{card}/memory")
        context.list_dir(card)
        if not self.read_first:
            total = context.read_u64(f"{card}/memory")
        return [DeviceInfo(id="a", library="Mine", total_memory=total or 0)]


@pytest.mark.parametrize("read_first", [False, True], ids=["listed-then-read", "read-then-listed"])
def test_a_file_that_was_listed_and_read_is_recorded_with_its_content(
    tmp_path: Path, read_first: bool
) -> None:
    """Whatever the order, a path read through the context is recorded with its bytes (ttm's
    pages_limit is listed in its folder, then read); a name only listed is recorded empty; the
    replay finds what the machine had."""
    live = write_tree(
        tmp_path / "live",
        {"/sys/class/mine/card0/memory": "17179869184\n", "/sys/class/mine/card0/other": "unread\n"},
    )
    recorder = Recorder()
    plugin = ListsThenReads(read_first)
    found = Scout(
        plugins=["mine"],
        extra=[plugin],
        entry_points=False,
        env={},
        platform="linux",
        root=live,
        recorder=recorder,
    ).discover()
    recorder.write(str(tmp_path / "rec"), platform="linux", env={})
    card = tmp_path / "rec/root/sys/class/mine/card0"
    assert (card / "memory").read_text() == "17179869184\n"
    assert (card / "other").read_text() == ""
    again = Scout(plugins=["mine"], extra=[plugin], entry_points=False, replay=tmp_path / "rec").discover()
    assert again.devices == found.devices and again.devices[0].total_memory == 16 << 30


@pytest.mark.parametrize(
    "name", ["hf_token", "HF_TOKEN", "Hf_Token", "aws_secret_access_key", "my_key", "Api_Key"]
)
def test_a_secret_looking_variable_is_never_recorded_whatever_its_case(name: str) -> None:
    """A variable discovery asked for whose name looks like a secret's (TOKEN, SECRET, KEY as a
    word ...) is left out of the recording in lower, upper or mixed case alike."""
    env = TrackedEnv({name: "s3cret", "cuda_visible_devices": "0", "GPUSCOUT_" + name: "s3cret"})
    env.get(name)
    env.get("cuda_visible_devices")
    assert SECRET_NAME.search(name)
    assert env.recorded() == {"cuda_visible_devices": "0"}


# -- ggml-vulkan's default set: a tie in driver priority keeps the first --------------------------


def _vk(index: int, name: str, vendor: int, uuid: str, driver: int) -> RawDevice:
    return RawDevice(
        index=index,
        name=name,
        device_type=2,  # DISCRETE_GPU
        vendor_id=vendor,
        device_id=0x1000 + index,
        api_version=(1 << 22) | (3 << 12),
        driver_version=0,
        uuid=uuid,
        driver_id=driver,
        driver_name=f"driver {driver}",
        storage_16bit=True,
        heaps=[[16 * GIB, 1]],
    )


def test_a_duplicate_icd_that_ties_in_ggmls_driver_priority_leaves_the_first_kept() -> None:
    """An NVIDIA card listed twice by the same driver (a duplicate ICD file) around an AMD card:
    ggml replaces the kept twin only for a driver it ranks strictly better, so Vulkan0 stays the
    NVIDIA card at raw index 0, Vulkan1 the AMD one, and the second listing is left out."""
    raws = [
        _vk(0, "NVIDIA RTX A4000", 0x10DE, "aa" * 16, DRIVER_NVIDIA_PROPRIETARY),
        _vk(1, "AMD Radeon RX 7900 XTX (RADV NAVI31)", 0x1002, "bb" * 16, DRIVER_MESA_RADV),
        _vk(2, "NVIDIA RTX A4000", 0x10DE, "aa" * 16, DRIVER_NVIDIA_PROPRIETARY),
    ]
    chosen = ggml_default_set(raws)
    assert chosen.used == [0, 1]
    assert list(chosen.left_out) == [2] and "as device 0" in chosen.left_out[2]


# -- hidden devices: the explanation follows the chain of replaced records ----------------------


RANK = {"CUDA": 0, "OpenCL": 1, "Vulkan": 2}
OPENCL = DeviceInfo(id="ocl0", library="OpenCL", pci_id="0000:2a:00.0", total_memory=8 * GIB)
VULKAN = DeviceInfo(id="0", library="Vulkan", pci_id="0000:2a:00.0", total_memory=8 * GIB)
HIDDEN = DeviceInfo(
    id="GPU-1",
    library="CUDA",
    pci_id="0000:2a:00.0",
    total_memory=8 * GIB,
    hidden_by="CUDA_VISIBLE_DEVICES=GPU-2",
)


def _ranked(a: DeviceInfo, b: DeviceInfo) -> bool:
    return RANK[a.library] < RANK[b.library]


@pytest.mark.parametrize(
    "order",
    [("opencl", "vulkan", "cuda"), ("vulkan", "opencl", "cuda")],
    ids=["opencl-first", "vulkan-first"],
)
def test_a_twin_of_a_replaced_twin_of_a_hidden_card_is_hidden_by_its_setting(order: tuple[str, ...]) -> None:
    """OpenCL and Vulkan views of a card, then its CUDA record hidden by CUDA_VISIBLE_DEVICES:
    Vulkan lost to OpenCL, OpenCL to the hidden CUDA record; every view leaves as "hidden by
    CUDA_VISIBLE_DEVICES=GPU-2", naming the CUDA record, never as a duplicate of a gone one."""
    views = {"opencl": OPENCL, "vulkan": VULKAN, "cuda": HIDDEN}
    kept, dropped = merge([(name, views[name]) for name in order], None, _ranked)
    assert kept == []
    assert {(d.device.library, d.reason, d.duplicate_of) for d in dropped} == {
        ("CUDA", "hidden by CUDA_VISIBLE_DEVICES=GPU-2", None),
        ("OpenCL", "hidden by CUDA_VISIBLE_DEVICES=GPU-2", HIDDEN.device_id),
        ("Vulkan", "hidden by CUDA_VISIBLE_DEVICES=GPU-2", HIDDEN.device_id),
    }


def test_set_aside_follows_a_chain_of_duplicates_to_the_hidden_survivor() -> None:
    """Given Vulkan dropped as the duplicate of OpenCL, and OpenCL of the hidden CUDA record,
    set_aside re-points both at the CUDA record with its setting; a drop whose chain ends at a
    visible survivor stays a plain duplicate."""
    visible = CARD.evolve(id="GPU-3", pci_id="0000:03:00.0")
    other = DeviceInfo(id="1", library="Vulkan", pci_id="0000:03:00.0")
    dropped = [
        Dropped(VULKAN, "duplicate", OPENCL.device_id),
        Dropped(OPENCL, "duplicate", HIDDEN.device_id),
        Dropped(other, "duplicate", visible.device_id),
    ]
    kept, out = set_aside([HIDDEN, visible], dropped)
    assert kept == [visible]
    assert [(d.device.id, d.reason, d.duplicate_of) for d in out] == [
        ("GPU-1", "hidden by CUDA_VISIBLE_DEVICES=GPU-2", None),
        ("0", "hidden by CUDA_VISIBLE_DEVICES=GPU-2", HIDDEN.device_id),
        ("ocl0", "hidden by CUDA_VISIBLE_DEVICES=GPU-2", HIDDEN.device_id),
        ("1", "duplicate", DeviceID(id="GPU-3", library="CUDA")),
    ]


# -- replay: "at most" the size limit ---------------------------------------------------------------


def _padded(document: dict[str, Any], size: int) -> bytes:
    text = json.dumps(document).encode()
    return text + b" " * (size - len(text))


def _recording(tmp_path: Path, manifest_size: int, answer_size: int, file_size: int) -> Path:
    rec = tmp_path / "rec"
    (rec / "answers").mkdir(parents=True)
    (rec / "root/sys").mkdir(parents=True)
    (rec / MANIFEST).write_bytes(_padded({"format": 1, "platform": "linux"}, manifest_size))
    (rec / "answers/cuda.json").write_bytes(_padded({"nvml": None}, answer_size))
    (rec / "root/sys/big").write_bytes(b"x" * file_size)
    return rec


def test_recorded_files_of_exactly_the_size_limit_are_accepted(tmp_path: Path) -> None:
    """A manifest of MAX_MANIFEST_BYTES, an answer file of MAX_ANSWER_BYTES and a tree file of the
    context's MAX_READ_BYTES are each at the limit, which is "at most": the recording loads."""
    rec = _recording(tmp_path, MAX_MANIFEST_BYTES, MAX_ANSWER_BYTES, MAX_READ_BYTES)
    recording = load(rec).with_answers(["cuda"])
    assert recording.platform == "linux" and recording.answers_for("cuda") == {"nvml": None}


@pytest.mark.parametrize(
    ("sizes", "limit"),
    [
        ((MAX_MANIFEST_BYTES + 1, 100, 1), MAX_MANIFEST_BYTES),
        ((100, MAX_ANSWER_BYTES + 1, 1), MAX_ANSWER_BYTES),
        ((100, 100, MAX_READ_BYTES + 1), MAX_READ_BYTES),
    ],
    ids=["manifest", "answer", "tree-file"],
)
def test_a_recorded_file_one_byte_over_its_limit_is_refused(
    tmp_path: Path, sizes: tuple[int, int, int], limit: int
) -> None:
    """One byte past a limit is a RecordingError naming the limit."""
    from gpuscout.errors import RecordingError

    with pytest.raises(RecordingError, match=f"larger than {limit} bytes"):
        load(_recording(tmp_path, *sizes))
