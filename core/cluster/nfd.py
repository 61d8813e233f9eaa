"""Kubernetes Node Feature Discovery (NFD): this node's devices as one local feature file.

NFD's worker reads every file in ``/etc/kubernetes/node-feature-discovery/features.d/`` (its
``local`` source): one ``<prefix>/<name>=<value>`` label per line, ``# +expiry-time=<RFC3339>``
as a directive, dot-files and files over 64 kB ignored. This module computes the labels
(``labels``); ``gpuscout.cluster._nfd_file`` renders and checks the file (``render``,
``check_labels``, ``check_prefix``) and writes it atomically (``write``): a temporary dot-file in
the same directory, fsync, rename, so NFD never reads half a file. Those names are importable
from here as well. See docs/nfd.md for every label.

Label names and values follow the Kubernetes rules (``IsQualifiedName``, ``IsValidLabelValue``
of k8s.io/apimachinery): a name part and a value are at most 63 characters of
``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`` (a value may be empty), a prefix is a DNS subdomain.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from gpuscout._records.device import model_name
from gpuscout.cluster._nfd_file import (
    DEFAULT_NAME,
    DEFAULT_PREFIX,
    MAX_FILE_BYTES,
    MAX_NAME,
    NFD_DIR,
    NFD_DOMAINS,
    RESERVED_DOMAINS,
    check_labels,
    check_name,
    check_prefix,
    parse_duration,
    render,
    write,
)
from gpuscout.errors import GpuscoutError
from gpuscout.version import VERSION

if TYPE_CHECKING:
    from gpuscout._records.device import DeviceInfo
    from gpuscout._records.results import Discovery
    from gpuscout.scout import Scout

_MIB = 1 << 20
_NOT_SLUG = re.compile(r"[^a-z0-9]+", re.ASCII)
_NOT_VALUE = re.compile(r"[^-A-Za-z0-9_.]+", re.ASCII)
_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", re.ASCII)
#: Longest library slug: long enough for any real name, short enough that every label of a
#: library leaves room for a model slug.
_MAX_LIBRARY_SLUG = 24
_HASH = 8
#: The first words of gpuscout's node-wide labels (``devices``, ``memory.total-mib``, ...). No
#: library's labels start with one: a library whose name slugs to one of them gets the hashed
#: slug (``integrated-<hash8>.count``), so ``integrated.count`` keeps one meaning. Library slugs
#: hold no ".", so a library's labels can only clash with a node-wide one through its first word.
NODE_WORDS = frozenset(
    {"devices", "discovery", "homogeneous", "integrated", "memory", "numa", "shared-memory", "version"}
)


# -- label names ----------------------------------------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]


def slug(text: str) -> str:
    """``text`` lower-cased, accents dropped, each run of characters outside ``[a-z0-9]`` one
    ``-``, trimmed: ``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"`` ("" may result)."""
    plain = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(c for c in plain if not unicodedata.combining(c))
    return _NOT_SLUG.sub("-", plain).strip("-")


def _short(text: str, room: int) -> str:
    """The slug of ``text`` in at most ``room`` characters: shortened with ``-<hash8>`` of the
    full text when longer, ``unnamed-<hash8>`` when it slugs to nothing."""
    s = slug(text)
    if not s:
        return f"unnamed-{_digest(text)}"
    if len(s) <= room:
        return s
    return f"{s[: room - _HASH - 1].rstrip('-')}-{_digest(text)}"


def _slugs(
    names: Iterable[str], room: int, keep: Callable[[str, str], bool], reserved: frozenset[str] = frozenset()
) -> dict[str, str]:
    """A distinct slug of at most ``room`` characters for each of ``names``. Names that slug
    alike all get ``-<hash8>`` of their own text, except one that ``keep(name, slug)`` (its
    lower-cased name is the slug itself: a built-in library); so do names whose slug is one of
    ``reserved``, always."""
    first = {name: _short(name, room) for name in sorted(set(names))}
    seen: dict[str, list[str]] = {}
    for name, s in first.items():
        seen.setdefault(s, []).append(name)
    out: dict[str, str] = {}
    for s, group in seen.items():
        for name in group:
            if s not in reserved and (len(group) == 1 or keep(name, s)):
                out[name] = s
            else:
                base = slug(name)[: room - _HASH - 1].rstrip("-") or "unnamed"
                out[name] = f"{base}-{_digest(name)}"
    return out


# -- labels ---------------------------------------------------------------------------------------


def sanitize_value(label: str, value: str) -> str:
    """``value`` as a valid label value: characters outside ``[-A-Za-z0-9_.]`` become ``-``,
    the ends are trimmed to alphanumerics, at most 63 characters. Raises GpuscoutError naming
    the label when nothing of a non-empty value is left."""
    clean = _EDGE.sub("", _NOT_VALUE.sub("-", value))
    clean = _EDGE.sub("", clean[:MAX_NAME])
    if value and not clean:
        raise GpuscoutError(
            f"NFD label {label!r}: value {value!r} has no character a "
            "Kubernetes label value may hold ([-A-Za-z0-9_.])"
        )
    return clean


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def _known_compute(d: DeviceInfo) -> bool:
    return d.compute_major >= 0 and d.compute_minor >= 0


def _known_driver(d: DeviceInfo) -> bool:
    return (d.driver_major, d.driver_minor) > (0, 0) and min(d.driver_major, d.driver_minor) >= 0


def _range(
    out: dict[str, str],
    key: str,
    devices: Sequence[DeviceInfo],
    order: Callable[[DeviceInfo], tuple[int, int]],
    show: Callable[[DeviceInfo], str],
) -> None:
    if devices:
        ranked = sorted(devices, key=lambda d: (order(d), show(d)))
        out[f"{key}.min"] = sanitize_value(f"{key}.min", show(ranked[0]))
        out[f"{key}.max"] = sanitize_value(f"{key}.max", show(ranked[-1]))


def _library_labels(
    out: dict[str, str], lib: str, devices: Sequence[DeviceInfo], flash: Callable[[DeviceInfo], bool]
) -> None:
    out[f"{lib}.count"] = str(len(devices))
    if not devices:
        return
    out[f"{lib}.memory.total-mib"] = str(sum(d.total_memory for d in devices) // _MIB)
    out[f"{lib}.memory.smallest-mib"] = str(min(d.total_memory for d in devices) // _MIB)
    _usable_labels(out, f"{lib}.", devices)
    _range(
        out,
        f"{lib}.compute",
        [d for d in devices if _known_compute(d)],
        lambda d: (d.compute_major, d.compute_minor),
        lambda d: d.compute,
    )
    _range(
        out,
        f"{lib}.driver",
        [d for d in devices if _known_driver(d)],
        lambda d: (d.driver_major, d.driver_minor),
        lambda d: d.driver,
    )
    out[f"{lib}.flash-attention"] = _bool(all(flash(d) for d in devices))
    out[f"{lib}.integrated.count"] = str(sum(d.integrated for d in devices))
    out[f"{lib}.shared-memory.count"] = str(sum(d.shared_memory for d in devices))
    nvidia = [d.nvidia_driver_major for d in devices if d.nvidia_driver_major > 0]
    if nvidia:
        out[f"{lib}.nvidia-driver"] = str(min(nvidia))
    room = MAX_NAME - len(f"{lib}.model.") - len(".memory-mib")
    models = _slugs((model_name(d) for d in devices), room, lambda name, s: False)
    for name, model in models.items():
        mine = [d for d in devices if model_name(d) == name]
        out[f"{lib}.model.{model}.count"] = str(len(mine))
        out[f"{lib}.model.{model}.memory-mib"] = str(min(d.total_memory for d in mine) // _MIB)


def device_labels(
    devices: Sequence[DeviceInfo],
    flash: Callable[[DeviceInfo], bool],
    libraries: Iterable[str] = (),
    problems: int = 0,
) -> dict[str, str]:
    """The labels (names without prefix, such as ``cuda.count``) of a node with ``devices``.

    ``flash`` says whether flash attention is safe on a device; ``libraries`` are slugs that
    get a ``.count`` even without a device (the built-in ones); ``problems`` is the number of
    plugins that failed or timed out. Libraries are told apart case-insensitively. A library
    whose name slugs to a word of ``NODE_WORDS`` is keyed by its hashed slug, so its labels and
    the node-wide ones never share a key.
    """
    by_library: dict[str, list[DeviceInfo]] = {lib: [] for lib in libraries}
    for d in devices:
        by_library.setdefault(d.library.lower(), []).append(d)
    lib_slugs = _slugs(by_library, _MAX_LIBRARY_SLUG, lambda name, s: name == s, NODE_WORDS)
    out: dict[str, str] = {}
    for name, lib in lib_slugs.items():
        _library_labels(out, lib, by_library[name], flash)
    out["devices"] = str(len(devices))
    out["memory.total-mib"] = str(sum(d.total_memory for d in devices) // _MIB)
    if devices:
        out["memory.smallest-mib"] = str(min(d.total_memory for d in devices) // _MIB)
    _usable_labels(out, "", devices)
    kinds = {(d.library.lower(), model_name(d), d.total_memory) for d in devices}
    out["homogeneous"] = _bool(len(kinds) == 1)
    out["integrated.count"] = str(sum(d.integrated for d in devices))
    # Devices whose memory is the system's (docs/shared-memory.md): their memory-mib is not
    # memory of their own.
    out["shared-memory.count"] = str(sum(d.shared_memory for d in devices))
    out["discovery.problems"] = str(problems)
    out["version"] = sanitize_value("version", VERSION)
    _numa_labels(out, devices)
    return dict(sorted(out.items()))


def _usable_labels(out: dict[str, str], prefix: str, devices: Sequence[DeviceInfo]) -> None:
    """``memory.usable-total-mib`` and ``memory.usable-smallest-mib`` (after ``prefix``): the
    devices' usable totals under the budgets (docs/budgets.md), only when a budget applies to
    one of them; the ``total-mib`` labels stay the hardware's."""
    if not any(d.usable_memory is not None for d in devices):
        return
    out[f"{prefix}memory.usable-total-mib"] = str(sum(d.usable_total for d in devices) // _MIB)
    out[f"{prefix}memory.usable-smallest-mib"] = str(min(d.usable_total for d in devices) // _MIB)


def _numa_labels(out: dict[str, str], devices: Sequence[DeviceInfo]) -> None:
    """``numa.<pci address>`` per device whose NUMA node the kernel said (``numa.0000-19-00-0
    =1``: the address's punctuation made ``-``, one label per card, partitions share it), and
    ``numa.nodes``: how many nodes those devices sit on. Nothing when no node is known."""
    placed: dict[str, int] = {}
    for d in devices:
        if d.pci_id and d.numa_node >= 0:
            address = d.pci_id.lower()  # the lowest node if records of one card disagree
            placed[address] = min(d.numa_node, placed.get(address, d.numa_node))
    for address, node in placed.items():
        out[f"numa.{slug(address)}"] = str(node)
    if placed:
        out["numa.nodes"] = str(len(set(placed.values())))


def labels(discovery: Discovery, scout: Scout) -> dict[str, str]:
    """The labels of ``discovery`` (names without prefix), flash attention as ``scout`` rules:
    every built-in library's count (0 without devices), and the labels docs/nfd.md lists."""
    from gpuscout._host.names import BUILTINS
    from gpuscout._records.results import PluginStatus

    problems = sum(r.status in (PluginStatus.FAILED, PluginStatus.TIMEOUT) for r in discovery.plugins)
    return device_labels(discovery.devices, scout.flash_attention, [name for name, _ in BUILTINS], problems)


__all__ = [
    "DEFAULT_NAME",
    "DEFAULT_PREFIX",
    "MAX_FILE_BYTES",
    "NFD_DIR",
    "NFD_DOMAINS",
    "NODE_WORDS",
    "RESERVED_DOMAINS",
    "check_labels",
    "check_name",
    "check_prefix",
    "device_labels",
    "labels",
    "parse_duration",
    "render",
    "sanitize_value",
    "slug",
    "write",
]
