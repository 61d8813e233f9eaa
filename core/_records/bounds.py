"""Bounds on untrusted JSON, checked before it is parsed: its size, how deep it nests and how
many objects it holds, scanned over its bytes (the structure characters only) so that a hostile
document costs little to refuse (``gpuscout._records.decode`` applies them)."""

from __future__ import annotations

import array
import itertools

from gpuscout.errors import GpuscoutError

#: Largest document ``from_json`` reads (a runner's /info reply is a few KiB).
MAX_JSON_SIZE = 64 << 20


#: Deepest nesting of arrays and objects ``from_json`` reads (wire records need 4).
MAX_JSON_DEPTH = 64


#: Most JSON objects one answer may hold (``from_json``, a runner's reply, an isolated worker's
#: answer, a recording's answer file): no machine has that many devices, and decoding a
#: million records takes seconds and hundreds of MB whatever the bytes were.
MAX_JSON_RECORDS = 100_000


# For the depth scan: every byte but brackets and quotes goes; openers become 1, closers -1
# (as signed bytes).
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')


_SIGNED_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


_SCAN_CHUNK = 1 << 12


_CLOSER = 0xFF


_PAIR = b"\x01\xff"


_ROUNDS = 4


def too_large(size: int, unit: str) -> GpuscoutError:
    return GpuscoutError(
        f"JSON text of {size} {unit} is too large: at most {MAX_JSON_SIZE} ({MAX_JSON_SIZE >> 20} MiB)"
    )


def too_deep(text: str) -> bool:
    """Whether brackets outside string literals nest deeper than ``MAX_JSON_DEPTH``, found
    without parsing (so before json.loads can recurse), in C-speed passes over the bytes.

    Text that is not JSON (an unterminated string, a stray backslash) may be judged either way;
    json.loads refuses it next anyway.
    """
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return False  # too few brackets to nest too deep
    steps = structure_bytes(text).translate(_SIGNED_STEP)
    depth = 0
    for start in range(0, len(steps), _SCAN_CHUNK):
        chunk = steps[start : start + _SCAN_CHUNK]
        opens = chunk.count(1)
        room = MAX_JSON_DEPTH - depth
        # Most chunks cannot climb past the limit even if every opener came first.
        if opens > room and _climb(chunk, room) > room:
            return True
        depth += 2 * opens - len(chunk)
    return False


def structure_bytes(text: str | bytes | bytearray) -> bytes:
    """The brackets of ``text`` that lie outside its string literals, in order (C-speed
    passes; text that is not JSON may be judged either way, json.loads refuses it next)."""
    # UTF-8 never puts an ASCII byte inside a multi-byte character, so bytes scan exactly.
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    # Escaped backslashes pair up from the left, so dropping each backslash pair and then each
    # backslash-quote leaves only the quotes that open and close strings.
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    # An adjacent quote pair is an empty string or two strings with nothing between them.
    data = data.replace(b'""', b"")
    if b'"' in data:
        data = b"".join(data.split(b'"')[::2])  # what lies outside the strings
    return data


def too_many_objects(text: str | bytes | bytearray, limit: int = MAX_JSON_RECORDS) -> bool:
    """Whether JSON ``text`` holds more than ``limit`` objects (``{`` outside its strings),
    found before parsing, so that a small text of a million ``{}`` is refused before decoding
    grows it (a million records cost seconds and hundreds of MB to build)."""
    opening = b"{" if isinstance(text, (bytes, bytearray)) else "{"
    if text.count(opening) <= limit:  # type: ignore[arg-type]
        return False  # fewer braces in all, strings included
    return structure_bytes(text).count(b"{") > limit


def _climb(steps: bytes, room: int) -> int:
    """How far ``steps`` (signed bytes, +1 or -1) climb above where they start: exact, or an
    upper bound when that is at most ``room``, found mostly by C-speed passes."""
    reduced, rounds = steps, 0
    # Each round drops every innermost pair, so every closed group loses one level; a few
    # rounds settle shallow text, deeper text is cheaper to walk step by step.
    while rounds < _ROUNDS and _PAIR in reduced:
        reduced = reduced.replace(_PAIR, b"")
        rounds += 1
    if _PAIR not in reduced:
        # Left: unmatched closers, then unmatched openers. The groups between them were at most
        # ``rounds`` deep, so nothing climbs higher than this.
        bound = rounds + max(0, reduced.count(1) - reduced.count(_CLOSER))
        if bound <= room:
            return bound
    signed = array.array("b")
    signed.frombytes(steps)
    return max(itertools.accumulate(signed, initial=0))
