"""from_json given hostile input: deep nesting, huge text, bad bytes, arbitrary JSON, wrong target
types. GpuscoutError is the only exception that leaves it; valid records still round-trip."""

from __future__ import annotations

import json
import time
from types import GenericAlias
from typing import Any

import pytest
from hypothesis import given, settings
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
from gpuscout._records.bounds import MAX_JSON_DEPTH, MAX_JSON_SIZE

TARGETS: list[Any] = [
    list[DeviceInfo],
    DeviceInfo,
    GPULayers,
    list[GPULayers],
    BackendMemory,
    DeviceMemory,
    list[DeviceMemory],
    SystemInfo,
    DeviceID,
]
WIRE_KEYS = [
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
    "Layers",
    "Name",
    "Weights",
    "Cache",
    "Graph",
    "InputWeights",
    "CPU",
    "GPUs",
    "free_swap",
    "uuid",
    "software",
    "usable_memory",
]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(WIRE_KEYS) | st.text(max_size=4), inner, max_size=6)
    ),
    max_leaves=30,
)


def read(text: Any, cls: Any) -> Any | None:
    """from_json's result, or None for a GpuscoutError; any other exception propagates."""
    try:
        return from_json(text, cls)
    except GpuscoutError:
        return None


#: The DeviceInfo wire keys and how each reads (the seed's JSON tags; Go's null is the zero value).
TEXT_KEYS = {
    "id": "id",
    "backend": "library",
    "name": "name",
    "description": "description",
    "filter_id": "filter_id",
    "pci_id": "pci_id",
    "gfx_target": "gfx_target",
    "uuid": "uuid",
}
FLAG_KEYS = {"integration": "integrated", "software": "software"}
SIZE_KEYS = {"total_memory": "total_memory", "free_memory": "free_memory", "usable_memory": "usable_memory"}
NUMBER_KEYS = {
    "ComputeMajor": "compute_major",
    "ComputeMinor": "compute_minor",
    "driver_major": "driver_major",
    "driver_minor": "driver_minor",
}
RECORD_TARGETS = [DeviceInfo, GPULayers, BackendMemory, DeviceMemory, SystemInfo, DeviceID]
LIST_TARGETS = [list[DeviceInfo], list[GPULayers], list[DeviceMemory]]


class Refused(Exception):
    """The reference reader's "this is not a device"."""


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def expected_device(item: Any) -> DeviceInfo:
    """The device a wire object means, read by the rules written out plainly: each known key
    holds its JSON type (a bool is no number), null is the field's zero value, other keys are
    ignored; whatever DeviceInfo itself refuses is refused."""
    if not isinstance(item, dict):
        raise Refused
    fields: dict[str, Any] = {}
    for key, value in item.items():
        if value is None:
            continue
        if key in TEXT_KEYS:
            if not isinstance(value, str):
                raise Refused
            fields[TEXT_KEYS[key]] = value
        elif key in FLAG_KEYS:
            if not isinstance(value, bool):
                raise Refused
            fields[FLAG_KEYS[key]] = value
        elif key in SIZE_KEYS or key in NUMBER_KEYS:
            if not _whole(value) or not -(2**63) <= value < 2**64:
                raise Refused
            fields[SIZE_KEYS.get(key) or NUMBER_KEYS[key]] = value
        elif key == "LibraryPath":
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise Refused
            fields["library_path"] = tuple(value)
    try:
        return DeviceInfo(**fields)
    except Exception:
        raise Refused from None


def expected_devices(items: Any) -> list[DeviceInfo] | None:
    """``items`` as the reference reads it, None when refused (the document itself must be an
    array: a top-level null is refused, though a null field reads as its zero value)."""
    if not isinstance(items, list):
        return None
    try:
        return [expected_device(item) for item in items]
    except Refused:
        return None


@settings(max_examples=300)
@given(text=st.text(), cls=st.sampled_from(TARGETS))
def test_any_text_reads_or_raises_a_gpuscout_error(text: str, cls: Any) -> None:
    """Arbitrary text (lone surrogates and controls included) never raises anything else, and
    what reads as devices is what the reference reads."""
    result = read(text, cls)
    if cls == list[DeviceInfo] and result is not None:
        assert result == expected_devices(json.loads(text))


@settings(max_examples=200)
@given(data=st.binary(), cls=st.sampled_from(TARGETS))
def test_any_bytes_read_or_raise_a_gpuscout_error(data: bytes, cls: Any) -> None:
    """Arbitrary bytes never raise anything but GpuscoutError; what reads is valid UTF-8 JSON."""
    result = read(data, cls)
    if result is not None:
        json.loads(data.decode("utf-8-sig"))


@settings(max_examples=500)
@given(value=JSON_VALUES, cls=st.sampled_from(TARGETS))
def test_any_json_value_reads_or_raises_a_gpuscout_error(value: Any, cls: Any) -> None:
    """Arbitrary JSON never raises anything but GpuscoutError; a record reads only from an
    object and a list only from an array, and devices read as the reference reads them."""
    result = read(json.dumps(value), cls)
    if cls == list[DeviceInfo]:
        assert result == expected_devices(value)
    elif cls == DeviceInfo:
        wanted = expected_devices([value])
        assert result == (wanted[0] if wanted else None)
    elif result is not None and cls in RECORD_TARGETS:
        assert isinstance(value, dict) and isinstance(result, cls)
    elif result is not None:
        assert cls in LIST_TARGETS and isinstance(value, list) and isinstance(result, list)
        assert len(result) == len(value)


@settings(max_examples=300)
@given(items=st.lists(st.dictionaries(st.sampled_from(WIRE_KEYS), JSON_VALUES, max_size=8), max_size=3))
def test_record_shaped_json_reads_or_raises_a_gpuscout_error(items: list[dict[str, Any]]) -> None:
    """Arrays of objects with the real wire keys and arbitrary values read as the reference
    reads them, or fail cleanly exactly when the reference refuses them."""
    assert read(json.dumps(items), list[DeviceInfo]) == expected_devices(items)


SCALAR_FOR = {
    "id": st.text(max_size=6),
    "backend": st.sampled_from(["CUDA", "ROCm", ""]),
    "integration": st.booleans(),
    "total_memory": st.integers(0, 2**63 - 1),
    "free_memory": st.integers(0, 2**63 - 1),
    "ComputeMajor": st.integers(-5, 5),
    "driver_major": st.integers(-(2**63), 2**64 - 1),
    "LibraryPath": st.lists(st.text(max_size=6), max_size=3),
    "uuid": st.text(max_size=6),
    "software": st.booleans(),
}


@settings(max_examples=300)
@given(
    items=st.lists(
        st.fixed_dictionaries(
            {}, optional={key: st.none() | strategy | SCALARS for key, strategy in SCALAR_FOR.items()}
        ),
        max_size=3,
    )
)
def test_mostly_well_typed_devices_read_as_the_reference_reads_them(items: list[dict[str, Any]]) -> None:
    """Objects whose values are mostly of the right type (so that many read): the devices read
    equal the reference's, field by field, and the rest are refused exactly when it refuses."""
    assert read(json.dumps(items), list[DeviceInfo]) == expected_devices(items)


def test_deep_nesting_is_refused_quickly() -> None:
    """100,000 open brackets are refused by the depth check, not a RecursionError."""
    start = time.monotonic()
    with pytest.raises(GpuscoutError, match=f"nested more than {MAX_JSON_DEPTH} deep"):
        from_json("[" * 100_000, list[DeviceInfo])
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_nesting_at_the_limit_is_parsed(opener: str) -> None:
    """64 levels parse (and then fail as records, not as depth)."""
    closer = "]" if opener == "[" else "}"
    with pytest.raises(GpuscoutError) as info:
        from_json(opener * MAX_JSON_DEPTH + closer * MAX_JSON_DEPTH, DeviceInfo)
    assert "nested" not in str(info.value)


def test_nesting_one_past_the_limit_is_refused() -> None:
    """65 levels are refused before parsing."""
    with pytest.raises(GpuscoutError, match="nested more than"):
        from_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), list[DeviceInfo])


@pytest.mark.parametrize("inside", ["[" * 1000, '\\"' + "{" * 1000, "\\\\" + "[" * 1000])
def test_brackets_inside_strings_do_not_count_as_nesting(inside: str) -> None:
    """Brackets in a string literal (after escaped quotes and backslashes too) are text."""
    device: DeviceInfo
    [device] = from_json(f'[{{"id":"{inside}"}}]', list[DeviceInfo])
    assert device.id == json.loads(f'"{inside}"')


TRICKY_TEXT = st.text(st.sampled_from('[]{}"\\/x\u00e9'), max_size=8)


@settings(max_examples=300)
@given(
    depth=st.integers(1, 2 * MAX_JSON_DEPTH),
    leaf=TRICKY_TEXT,
    wrappers=st.lists(
        st.tuples(st.booleans(), TRICKY_TEXT), min_size=2 * MAX_JSON_DEPTH, max_size=2 * MAX_JSON_DEPTH
    ),
)
def test_the_depth_check_counts_only_real_nesting(
    depth: int, leaf: str, wrappers: list[tuple[bool, str]]
) -> None:
    """A value nested exactly `depth` deep, strings full of brackets, quotes and backslashes
    around it, is refused for depth iff `depth` passes the limit."""
    value: Any = leaf
    for as_list, text in wrappers[:depth]:
        value = [text, value, text] if as_list else {text: value, text + "k": text}
    try:
        from_json(json.dumps(value, ensure_ascii=False), DeviceMemory)
        message = ""
    except GpuscoutError as exc:
        message = str(exc)
    assert ("nested more than" in message) == (depth > MAX_JSON_DEPTH)


def test_text_over_the_size_limit_is_refused_naming_its_size() -> None:
    """More than 64 MiB of text is refused before parsing, with its size and the limit."""
    with pytest.raises(GpuscoutError, match=f"{MAX_JSON_SIZE + 1} bytes is too large"):
        from_json(b" " * (MAX_JSON_SIZE + 1), list[DeviceInfo])


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b'[{"id":"\xff"}]', "at byte 8"),
        ("[]".encode("utf-16"), "at byte 0"),
        (b'[{"id":"\xed\xa0\x80"}]', "at byte 8"),
    ],
)
def test_bytes_that_are_not_utf8_are_refused(data: bytes, where: str) -> None:
    """Invalid UTF-8 (UTF-16, lone surrogates encoded) is a GpuscoutError saying where."""
    with pytest.raises(GpuscoutError, match=f"not UTF-8 {where}"):
        from_json(data, list[DeviceInfo])


def test_utf8_bytes_with_a_bom_read_as_before() -> None:
    """A UTF-8 byte order mark is skipped, as json.loads does for bytes."""
    assert from_json(b'\xef\xbb\xbf[{"id":"x"}]', list[DeviceInfo]) == [DeviceInfo(id="x")]


@pytest.mark.parametrize(
    "cls",
    [
        int,
        str,
        dict,
        list,
        list[int],
        list[str],
        "DeviceInfo",
        GenericAlias(list, (DeviceInfo, int)),
        [DeviceInfo],
        {},
        None,
        tuple[DeviceInfo],
    ],
)
def test_a_target_that_is_not_a_wire_type_is_refused(cls: Any) -> None:
    """Only wire records and lists of one can be read; anything else is a GpuscoutError."""
    with pytest.raises(GpuscoutError, match="expected a wire record type"):
        from_json("[]", cls)


def test_a_target_whose_repr_fails_is_refused() -> None:
    """Even an int too long for repr() as the target gives a GpuscoutError."""
    with pytest.raises(GpuscoutError, match="cannot read a int"):
        from_json("[]", 10**5000)


@pytest.mark.parametrize("text", [None, 5, ["[]"], memoryview(b"[]")])
def test_text_that_is_not_str_or_bytes_is_refused(text: Any) -> None:
    """Input other than str, bytes or bytearray is a GpuscoutError naming its type."""
    with pytest.raises(GpuscoutError, match="expected str or bytes"):
        from_json(text, list[DeviceInfo])


def test_a_number_past_the_digit_limit_is_a_gpuscout_error() -> None:
    """A 5,000-digit integer (int()'s limit is 4,300) is refused as bad JSON."""
    with pytest.raises(GpuscoutError, match="not valid JSON"):
        from_json('[{"total_memory":' + "9" * 5000 + "}]", list[DeviceInfo])


def test_a_huge_bad_value_gives_a_short_message() -> None:
    """A megabyte string where an int belongs is named, but cut short in the message."""
    with pytest.raises(GpuscoutError, match=r"\[0\]\.total_memory: expected int") as info:
        from_json('[{"total_memory":"' + "x" * 1_000_000 + '"}]', list[DeviceInfo])
    assert len(str(info.value)) < 400


texts = st.text(max_size=16)
ints = st.integers(min_value=0, max_value=2**64 - 1)
memories = st.builds(
    DeviceMemory,
    id=texts,
    library=texts,
    name=texts,
    weights=st.lists(ints, max_size=3),
    cache=st.lists(ints, max_size=3),
    graph=ints,
)


@settings(max_examples=200)
@given(
    device=st.builds(
        DeviceInfo,
        id=texts,
        library=texts,
        name=texts,
        description=texts,
        filter_id=texts,
        integrated=st.booleans(),
        pci_id=texts,
        total_memory=ints,
        free_memory=ints,
        compute_major=st.integers(-1, 2**31),
        compute_minor=st.integers(-1, 2**31),
        driver_major=ints,
        driver_minor=ints,
        gfx_target=texts,
        library_path=st.lists(texts),
        uuid=texts,
        free_memory_unknown=st.booleans(),
        software=st.booleans(),
        max_allocation=ints,
    )
)
def test_a_device_with_any_text_round_trips(device: DeviceInfo) -> None:
    """Any unicode (lone surrogates included) in every field reads back equal, alone and in a list."""
    assert from_json(to_json(device), DeviceInfo) == device
    assert from_json(to_json([device]).encode(), list[DeviceInfo]) == [device]


@settings(max_examples=100)
@given(memory=st.builds(BackendMemory, input_weights=ints, cpu=memories, gpus=st.lists(memories, max_size=3)))
def test_backend_memory_round_trips(memory: BackendMemory) -> None:
    """BackendMemory with nested DeviceMemory records reads back equal."""
    assert from_json(to_json(memory), BackendMemory) == memory


@settings(max_examples=100)
@given(
    layers=st.lists(
        st.builds(GPULayers, id=texts, library=texts, layers=st.lists(st.integers(0, 2**31), max_size=5)),
        max_size=4,
    )
)
def test_gpu_layers_lists_round_trip(layers: list[GPULayers]) -> None:
    """A list of GPULayers reads back equal, as a GPULayersList."""
    back: Any = from_json(to_json(layers), list[GPULayers])
    assert isinstance(back, GPULayersList) and list(back) == layers


@settings(max_examples=100)
@given(
    system=st.builds(SystemInfo, total_memory=ints, free_memory=ints, free_swap=ints),
    device_id=st.builds(DeviceID, id=texts, library=texts),
)
def test_system_info_and_device_ids_round_trip(system: SystemInfo, device_id: DeviceID) -> None:
    """The small records read back equal."""
    assert from_json(to_json(system), SystemInfo) == system
    assert from_json(to_json(device_id), DeviceID) == device_id


@pytest.mark.parametrize("number", ["1e999", "-1e999", "NaN", "Infinity"])
def test_a_number_that_is_not_finite_is_refused_naming_its_path(number: str) -> None:
    """A plugin's elapsed_ms of 1e999 (Python's json reads it as inf), NaN or Infinity: a
    GpuscoutError naming the field, never an infinite wall time read back."""
    from gpuscout import Discovery

    text = (
        '{"devices": [], "dropped": [], "system": {"total_memory": 1, "free_memory": 0, '
        '"free_swap": 0}, "plugins": [{"name": "cuda", "status": "ok", "elapsed_ms": ' + number + "}]}"
    )
    with pytest.raises(GpuscoutError, match=r"^plugins\[0\]\.elapsed_ms: expected "):
        from_json(text, Discovery)
