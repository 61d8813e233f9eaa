"""mutmut's third round (tests/MUTATION.md): what ``gpuscout record --anonymize`` replaces.

The rules of docs/recordings.md ("Anonymizing") that no test held: one identifier gets one
replacement everywhere (files, answers, its hex and byte forms), its case and length are kept,
the host name becomes ``host-0``, and nothing else changes. Each test names, in its docstring,
the mutants of ``gpuscout._recording.anonymize`` it kills (``anonymize.xǁAnonymizerǁfile__mutmut_1``
is mutmut's name for the first mutant of ``Anonymizer.file``).
"""

from __future__ import annotations

import re

import pytest

from gpuscout._recording.anonymize import Anonymizer

UUID = "12345678-abcd-ef01-2345-6789abcdef01"
HEX = UUID.replace("-", "")


def test_the_host_name_becomes_host_0() -> None:
    """A host name of three characters or more is replaced wherever it stands, by ``host-0``.

    Kills anonymize.xǁAnonymizerǁ__init____mutmut_4/5 (never replaced), _7/_8 (a three-letter
    name kept), anonymize.xǁAnonymizerǁtext__mutmut_16/17 (another replacement)."""
    assert Anonymizer("gpubox").text("user@gpubox: gpubox.local") == "user@host-0: host-0.local"
    assert Anonymizer("abc").text("abc") == "host-0"


def test_a_host_name_shorter_than_three_is_left_alone() -> None:
    """A one- or two-letter name would replace letters everywhere: it is not replaced (and
    nothing stands in for it). Kills anonymize.xǁAnonymizerǁ__init____mutmut_6 (always
    replaced), _9 (``XXXX`` replaced instead)."""
    assert Anonymizer("ab").text("cab XXXX about") == "cab XXXX about"


def test_an_upper_case_uuid_or_hex_run_keeps_its_case_and_shape() -> None:
    """The replacement of an upper-case UUID or hex run is upper case, of the same shape, and
    the same identifier as its lower-case form. Kills anonymize.xǁAnonymizerǁ_uuid__mutmut_13/14,
    anonymize.xǁAnonymizerǁ_run__mutmut_4 (no value), _6/_7/_8 (case lost or forced)."""
    anon = Anonymizer("")
    upper = anon.text(f"GPU-{UUID.upper()}")
    assert re.fullmatch(r"GPU-[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}", upper)
    assert upper.lower() == anon.text(f"GPU-{UUID}").lower() != f"gpu-{UUID}"
    run = anon.text(HEX.upper() * 2)
    assert re.fullmatch(r"[0-9A-F]{64}", run) and run != HEX.upper() * 2
    assert anon.text(HEX * 2) == run.lower()


def test_whole_file_ids_are_replaced_by_kind() -> None:
    """``hostname`` becomes ``host-0``; a numeric id a number; any other id file hex of its
    length (at least 8), each with one newline. Kills anonymize.xǁAnonymizerǁfile__mutmut_1
    (the name lost: the serial kept), _4..7/_9 (no value), _13..30 (the kinds swapped, the number
    or digest lost, the width changed)."""
    anon = Anonymizer("")
    assert anon.file("/proc/sys/kernel/hostname", b"gpubox\n") == b"host-0\n"
    number = anon.file("/sys/class/drm/card0/device/unique_id", b"1234567\n")
    assert re.fullmatch(rb"\d+\n", number) and number != b"1234567\n"
    short = anon.file("/sys/class/drm/card0/device/serial_number", b"AB12\n")
    assert re.fullmatch(rb"[0-9a-f]{8}\n", short)
    long = anon.file("/sys/class/drm/card0/device/serial_number", b"SN-0123456789AB\n")
    assert re.fullmatch(rb"[0-9a-f]{15}\n", long)
    assert anon.file("/sys/x/serial_number", b"AB12") == short  # one id, one replacement


def test_an_id_file_with_bytes_that_are_not_utf8_is_replaced() -> None:
    """Kills anonymize.xǁAnonymizerǁfile__mutmut_8/11/12 (decoding strictly)."""
    out = Anonymizer("").file("/sys/x/serial_number", b"\xffAB12\n")
    assert re.fullmatch(rb"[0-9a-f]{8}\n", out)


def test_a_number_id_is_one_number_in_files_lines_and_answers() -> None:
    """A KFD node's ``unique_id`` line, amdgpu's ``unique_id`` file and an answer's
    ``unique_id`` get the same number; another id another number; other lines stay.
    Kills anonymize.xǁAnonymizerǁ_number__mutmut_1..3/5/6/8/9, anonymize.xǁAnonymizerǁfile__mutmut_36..46,
    anonymize.xǁAnonymizerǁjson__mutmut_51..53."""
    anon = Anonymizer("")
    new = int(anon.file("/sys/class/drm/card0/device/unique_id", b"1234567\n"))
    props = anon.file(
        "/sys/class/kfd/kfd/topology/nodes/1/properties",
        b"simd_count 304\nunique_id 1234567\nlocation_id 256\n",
    )
    assert props == b"simd_count 304\nunique_id %d\nlocation_id 256\n" % new
    assert anon.json({"unique_id": 1234567}) == {"unique_id": new}
    assert anon.json({"unique_id": 7654321}) != {"unique_id": new}


def test_a_file_that_is_not_utf8_keeps_its_bytes_around_the_ids() -> None:
    """Kills anonymize.xǁAnonymizerǁfile__mutmut_50/55/58/59/62/63 (bytes that are not UTF-8
    refused or lost)."""
    anon = Anonymizer("")
    data = b"\xff\xfe0::/pod" + UUID.encode() + b"\n"
    out = anon.file("/proc/self/cgroup", data)
    assert out.startswith(b"\xff\xfe0::/pod") and UUID.encode() not in out and len(out) == len(data)


def test_a_deviceuuid_of_16_bytes_matches_the_uuid_text() -> None:
    """Vulkan's 16-byte deviceUUID, a 32-digit hex id under an id key and the UUID in text get
    the same replacement, so the merge still sees one card. Kills anonymize.xǁAnonymizerǁjson__mutmut_9/10
    (16 bytes not taken as one id), _11, _14..16 (a 0 byte refuses it), _19..22, _33/_34 (a hex
    id replaced another way)."""
    anon = Anonymizer("")
    raw = list(bytes.fromhex(HEX.replace("1", "0")))  # with 0 bytes in it
    text_form = anon.text(f"GPU-{UUID.replace('1', '0')}")[4:].replace("-", "")
    assert bytes(anon.json({"deviceUUID": raw})["deviceUUID"]).hex() == text_form
    assert anon.json({"uuid": HEX.upper()}) == {"uuid": anon.text(HEX)}


@pytest.mark.parametrize(
    "value",
    [
        {"counts": [1, 2, 3]},
        {"values": list(range(16))},
        {"uuid": [True] * 16},
        {"count": 5},
        {"unique_id": None, "serial": True, "uuid": 1.5},
        {"name": "NVIDIA H100", "memory": [80, 81]},
    ],
)
def test_what_is_not_an_id_is_kept(value: dict[str, object]) -> None:
    """Lists and numbers under other keys, and booleans, None and floats under id keys, are
    kept. Kills anonymize.xǁAnonymizerǁjson__mutmut_6/7 (byte lists under any key), _13 (a
    list of booleans taken for bytes), _49/_50 (any number, or a non-number under an id key)."""
    assert Anonymizer("").json(value) == value


@pytest.mark.parametrize("last", [256, 300])
def test_a_list_of_numbers_over_255_is_not_a_byte_string(last: int) -> None:
    """Under an id key, 16 numbers of which one is over 255 are 16 ids, not one UUID.

    Kills anonymize.xǁAnonymizerǁjson__mutmut_12/17/18 (taken for bytes: ValueError)."""
    anon = Anonymizer("")
    out = anon.json({"uuid": [*range(1, 16), last]})["uuid"]
    assert len(out) == 16 and out[0] == anon.json({"uuid": 1})["uuid"] != 1


def test_ids_inside_objects_and_lists_are_replaced_by_their_key() -> None:
    """An id string under an id key, in a nested object or a list, is replaced by hex of its
    length (at least 8); the same value under another key is not. Kills
    anonymize.xǁAnonymizerǁjson__mutmut_5 (nested keys lost), _24/_26 (list items' key lost),
    _42..47 (the digest or its width)."""
    anon = Anonymizer("")
    out = anon.json({"gpu": {"serial": "AB12", "name": "AB12"}, "serials": ["SN-0123456789AB"]})
    assert re.fullmatch(r"[0-9a-f]{8}", out["gpu"]["serial"]) and out["gpu"]["name"] == "AB12"
    assert re.fullmatch(r"[0-9a-f]{15}", out["serials"][0])


def test_an_id_holding_a_lone_surrogate_is_replaced() -> None:
    """JSON may hold a lone surrogate (``"\\udcff"``); it is digested, not an error.

    Kills anonymize.xǁAnonymizerǁ_digest__mutmut_6/9/10 (strict encoding)."""
    out = Anonymizer("").json({"serial": "\udcffAB"})["serial"]
    assert re.fullmatch(r"[0-9a-f]{8}", out)
