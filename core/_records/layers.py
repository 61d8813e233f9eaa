"""Layer placement records: the seed's GPULayers and GPULayersList."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, SupportsIndex

import attrs

from gpuscout._records.device import DeviceID
from gpuscout._records.fields import RecordError, show_value
from gpuscout._records.gofmt import go_plus_v

#: Go's math.MaxInt on 64-bit platforms: the first layer of an empty assignment.
MAX_INT = 2**63 - 1


def _int_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise RecordError(
            f"GPULayers.layers: expected a list of layer indexes, got {show_value(value)}", "layers"
        )
    items = list(value)
    bad = next(
        (
            i
            for i, v in enumerate(items)
            if isinstance(v, bool) or not isinstance(v, int) or not -MAX_INT - 1 <= v <= MAX_INT
        ),
        None,
    )
    if bad is not None:
        raise RecordError(
            f"GPULayers.layers[{bad}]: expected an int in -2**63..2**63-1, got {show_value(items[bad])}",
            "layers",
        )
    return items


def _is_str(instance: Any, attribute: attrs.Attribute[str], value: Any) -> None:
    if not isinstance(value, str):
        raise RecordError(
            f"GPULayers.{attribute.name}: expected str, got {show_value(value)}", attribute.name
        )


@attrs.define(eq=True)
class GPULayers:
    """The layers placed on one GPU."""

    id: str = attrs.field(default="", validator=_is_str)
    library: str = attrs.field(default="", validator=_is_str)
    layers: list[int] = attrs.field(factory=list, converter=_int_list)

    @property
    def device_id(self) -> DeviceID:
        """The GPU's DeviceID."""
        return DeviceID(self.id, self.library)

    @property
    def first_layer(self) -> int:
        """The smallest layer index on this GPU, or Go's MaxInt when it holds none."""
        return min(self.layers) if self.layers else MAX_INT

    def __lt__(self, other: GPULayers) -> bool:
        return self.first_layer < other.first_layer

    def __str__(self) -> str:
        # Byte for byte the seed's String(); unlike Go we sort a copy, not the record.
        if not self.layers:
            return ""
        layers = sorted(self.layers)
        base = layers[0]
        if all(layer == base + i for i, layer in enumerate(layers)):
            return f"ID:{self.id} Layers:{len(layers)}({layers[0]}..{layers[-1]})"
        return f"ID:{self.id} Layers:{len(layers)}{go_plus_v(layers)}"


class GPULayersList(list[GPULayers]):
    """Layer assignments across GPUs (a list of GPULayers)."""

    def __init__(self, iterable: Iterable[GPULayers] = ()) -> None:
        if isinstance(iterable, (str, bytes, Mapping)) or not isinstance(iterable, Iterable):
            raise RecordError(f"GPULayersList: expected an iterable of GPULayers, got {show_value(iterable)}")
        items = list(iterable)
        bad = next((i for i, g in enumerate(items) if not isinstance(g, GPULayers)), None)
        if bad is not None:
            raise RecordError(f"GPULayersList[{bad}]: expected a GPULayers, got {show_value(items[bad])}")
        super().__init__(items)

    def sum(self) -> int:
        """Total number of layers over all GPUs."""
        return sum(len(g.layers) for g in self)

    def sort(self, *, key: Callable[[GPULayers], Any] | None = None, reverse: bool = False) -> None:
        """Sort in place, by first layer unless ``key`` says otherwise (stable)."""
        super().sort(key=key or (lambda g: g.first_layer), reverse=reverse)

    def hash(self) -> int:
        """An unsigned 64-bit identifier of this assignment, stable across processes and machines.

        Algorithm: BLAKE2b with an 8-byte digest over, for each GPU that holds layers and in list
        order, the UTF-8 id, a NUL, the UTF-8 library, a NUL, then each layer as a little-endian
        signed 64-bit integer. The digest read big-endian is the value. (The seed uses a per-process
        maphash and native byte order, so its values are not comparable across processes.)
        """
        import hashlib  # only when a hash is asked for: it loads OpenSSL

        h = hashlib.blake2b(digest_size=8)
        for g in self:
            if g.layers:
                h.update(g.id.encode() + b"\0" + g.library.encode() + b"\0")
                try:
                    h.update(struct.pack(f"<{len(g.layers)}q", *g.layers))
                except struct.error:  # layers changed in place after the checks
                    _int_list(g.layers)  # says which layer, as RecordError
                    raise RecordError(
                        f"GPULayers.layers: cannot hash {show_value(g.layers)}", "layers"
                    ) from None
        return int.from_bytes(h.digest(), "big")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self.hash())

    def __str__(self) -> str:
        inner = "[" + " ".join(str(g) for g in self) + "]"
        total = self.sum()
        return f"{total}{inner}" if total > 0 else inner

    def __repr__(self) -> str:
        return f"GPULayersList({list.__repr__(self)})"

    def copy(self) -> GPULayersList:
        """A shallow copy that stays a GPULayersList."""
        return GPULayersList(self)

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            return GPULayersList(super().__getitem__(index))
        return super().__getitem__(index)


def layer_ranges(layers: Sequence[int]) -> str:
    """Layer indices as ranges (``0-3,5``); ``-`` for none."""
    if not layers:
        return "-"
    out, start = [], layers[0]
    for prev, cur in zip(layers, [*layers[1:], None], strict=True):
        if cur != prev + 1:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur if cur is not None else start
    return ",".join(out)
