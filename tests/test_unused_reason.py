"""``unused_reason``: a device the runtime in a child would not use unless selected (outside
ggml-vulkan's default set, not Metal's default device) ranks after the others, says why in
``list --explain``, and is on the wire only when set."""

from __future__ import annotations

import json

from gpuscout import DeviceInfo, from_json, rank, to_json
from gpuscout._records.device import SystemInfo
from gpuscout._records.fields import RecordError
from gpuscout._records.results import Discovery
from gpuscout.cli._render.explain import explain, explain_lines
from gpuscout.sizes import GIB

USED = DeviceInfo(id="0", library="Vulkan", integrated=True, free_memory=4 * GIB)
UNUSED = DeviceInfo(
    id="1",
    library="Vulkan",
    free_memory=24 * GIB,
    unused_reason="not in ggml-vulkan's default device set: no 16-bit storage",
)


def test_an_unused_device_ranks_after_every_used_one_whatever_its_memory() -> None:
    """An unused device ranks after every used one whatever its memory, yet before a software one."""
    assert rank([UNUSED, USED]) == [USED, UNUSED]
    software = DeviceInfo(id="2", library="Vulkan", software=True, free_memory=64 * GIB)
    assert rank([software, UNUSED, USED]) == [USED, UNUSED, software]


def test_the_reason_is_on_the_wire_only_when_set() -> None:
    """unused_reason is on the wire only when set, and reads back equal."""
    assert "unused_reason" not in json.loads(to_json(USED))
    wire = json.loads(to_json(UNUSED))
    assert wire["unused_reason"] == UNUSED.unused_reason
    assert from_json(to_json([USED, UNUSED]), list[DeviceInfo]) == [USED, UNUSED]


def test_an_unused_reason_that_is_not_text_is_refused() -> None:
    """An unused_reason that is not text is a RecordError naming the field and the value."""
    try:
        DeviceInfo(id="x", library="L", unused_reason=3)  # type: ignore[arg-type]
    except RecordError as exc:
        assert str(exc) == "DeviceInfo.unused_reason: expected str, got 3"
    else:
        raise AssertionError("an int unused_reason was accepted")


def test_explain_says_which_criterion_and_why() -> None:
    """list --explain says a device ranks later for being unused, and gives its reason."""
    found = Discovery(devices=rank([UNUSED, USED]), dropped=[], system=SystemInfo(), plugins=[])
    data = explain(found)
    assert data["ranking"][0]["decided_by"] == "unused"
    assert data["ranking"][1]["unused_reason"] == UNUSED.unused_reason
    text = "\n".join(explain_lines(data))
    assert "before one it would not use unless selected" in text
    assert "[not used by the runtime unless selected: not in ggml-vulkan's default" in text
