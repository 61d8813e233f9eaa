"""A Ray cluster inventory's results: one ``NodeResult`` per node, a ``Summary`` of the whole
cluster, and where Ray's own view of a node disagrees with what gpuscout found there. Pure data
and arithmetic: nothing here imports Ray.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from gpuscout._records.device import DeviceInfo, model_name
from gpuscout._records.results import Discovery, PluginStatus

#: Libraries whose devices Ray itself counts as its ``GPU`` resource (NVIDIA through NVML, AMD
#: through amdsmi, Apple's GPU through MPS). Vulkan-only devices (an Intel GPU, which Ray counts
#: only through oneAPI) are not compared.
RAY_GPU_LIBRARIES = ("CUDA", "ROCm", "Metal")


class NodeStatus(enum.StrEnum):
    """What became of one node's discovery; the values are what JSON carries."""

    OK = "ok"
    DEAD = "dead"  # Ray lists the node as dead, or it died while its task ran
    TIMEOUT = "timeout"  # no answer before the inventory's deadline (the task was cancelled)
    MISSING = "missing"  # gpuscout (or a gpuscout with cluster support) is not installed there
    FAILED = "failed"  # the task failed or answered something unreadable


@attrs.frozen
class Disagreement:
    """Where Ray's view of a node differs from gpuscout's: ``kind`` is ``gpu_count`` or
    ``accelerator_type``; ``ray`` and ``gpuscout`` the two views as text."""

    node_id: str
    hostname: str
    kind: str
    ray: str
    gpuscout: str
    detail: str


@attrs.frozen
class NodeResult:
    """One node: who it is, what Ray says it has, and what gpuscout found there.

    ``discovery`` is None unless ``status`` is ``ok``; ``reason`` says why then. ``ran_on`` is the
    node id the answering task read from its own runtime (it must equal ``node_id``), ``pid`` its
    process; ``notes`` what the node said about its discovery; ``visible_env`` the visibility
    variables its discovery saw; ``elapsed`` seconds from submission to answer.
    """

    node_id: str
    hostname: str = ""
    address: str = ""
    status: NodeStatus = NodeStatus.OK
    reason: str = ""
    ray_resources: Mapping[str, float] = attrs.field(factory=dict)
    accelerator_type: str = ""
    version: str = ""
    ran_on: str = ""
    pid: int = 0
    notes: tuple[str, ...] = ()
    visible_env: Mapping[str, str] = attrs.field(factory=dict)
    discovery: Discovery | None = None
    elapsed: float = 0.0

    @property
    def devices(self) -> list[DeviceInfo]:
        """The node's ranked devices ([] when its discovery did not come back)."""
        return list(self.discovery.devices) if self.discovery is not None else []

    def problems(self) -> list[str]:
        """One line per plugin that failed or timed out on the node."""
        if self.discovery is None:
            return []
        return [
            f"{r.name} {r.status}: {r.error}"
            for r in self.discovery.plugins
            if r.status in (PluginStatus.FAILED, PluginStatus.TIMEOUT)
        ]


@attrs.frozen
class ModelCount:
    """How many devices of one model and library the cluster has, on how many nodes."""

    library: str
    name: str
    count: int
    nodes: int


@attrs.frozen
class LibraryMemory:
    """Memory of one library's devices across the cluster, in bytes. ``free_memory`` sums only
    known free figures: the devices whose free memory is unknown are counted apart
    (``free_unknown_devices``, holding ``free_unknown_total_memory`` of ``total_memory``)."""

    library: str
    devices: int
    total_memory: int
    free_memory: int
    free_unknown_devices: int = 0
    free_unknown_total_memory: int = 0


@attrs.frozen
class Summary:
    """The whole cluster: nodes by status, devices by model and library, memory by library, and
    every node where Ray and gpuscout disagree."""

    nodes: int
    nodes_by_status: Mapping[str, int]
    devices: int
    models: tuple[ModelCount, ...]
    memory: tuple[LibraryMemory, ...]
    disagreements: tuple[Disagreement, ...]


@attrs.frozen
class Inventory:
    """What ``inventory()`` returns: every node (alive or not) and the summary."""

    nodes: tuple[NodeResult, ...]
    summary: Summary
    elapsed: float = 0.0


# -- Ray's view against gpuscout's ----------------------------------------------------------------

_WORDS = re.compile(r"[a-z0-9]+")


def _contains(words: list[str], part: list[str]) -> bool:
    return any(words[i : i + len(part)] == part for i in range(len(words) - len(part) + 1))


def type_matches(ray_type: str, model: str) -> bool:
    """Whether Ray's accelerator type names ``model``. Ray shortens names ("H100" for "NVIDIA
    H100 80GB HBM3", "AMD-Instinct-MI300X-OAM" for "AMD Instinct MI300X"), so the words of one
    (lower case, split at anything but letters and digits) must appear in a row in the other:
    whole words, so "L4" does not name an "L40S", nor "H20" an "H200"."""
    a, b = _WORDS.findall(ray_type.lower()), _WORDS.findall(model.lower())
    return bool(a and b) and (_contains(b, a) or _contains(a, b))


def _counted(devices: Iterable[DeviceInfo]) -> list[DeviceInfo]:
    return [d for d in devices if d.library.lower() in {lib.lower() for lib in RAY_GPU_LIBRARIES}]


def _models_text(devices: Sequence[DeviceInfo]) -> str:
    counts: dict[str, int] = {}
    for d in devices:
        name = model_name(d) or "(unnamed)"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n}x {name}" for name, n in sorted(counts.items())) or "none"


def disagreements(node: NodeResult) -> list[Disagreement]:
    """Where Ray's view of ``node`` (its ``GPU`` resource and accelerator type, which Ray reads
    from device 0 alone) differs from the GPUs gpuscout found there (``RAY_GPU_LIBRARIES``)."""
    if node.status is not NodeStatus.OK:
        return []
    gpus = _counted(node.devices)
    ray_gpus = float(node.ray_resources.get("GPU", 0.0))
    out: list[Disagreement] = []

    def add(kind: str, ray: str, found: str, detail: str) -> None:
        out.append(Disagreement(node.node_id, node.hostname, kind, ray, found, detail))

    if ray_gpus != len(gpus):
        add(
            "gpu_count",
            f"{ray_gpus:g}",
            str(len(gpus)),
            f"Ray schedules {ray_gpus:g} {'GPU' if ray_gpus == 1 else 'GPUs'} here; "
            f"gpuscout finds {len(gpus)} ({_models_text(gpus)})",
        )
    if node.accelerator_type and gpus:
        others = [d for d in gpus if not type_matches(node.accelerator_type, model_name(d))]
        if others:
            add(
                "accelerator_type",
                node.accelerator_type,
                _models_text(gpus),
                f"Ray labels the node {node.accelerator_type} (from device 0 only); gpuscout "
                f"finds {_models_text(gpus)}",
            )
    elif gpus and not node.accelerator_type:
        add(
            "accelerator_type",
            "",
            _models_text(gpus),
            f"Ray has no accelerator type for this node; gpuscout finds {_models_text(gpus)}",
        )
    elif node.accelerator_type and not gpus and ray_gpus == 0:
        add(
            "accelerator_type",
            node.accelerator_type,
            "none",
            f"Ray labels the node {node.accelerator_type}; gpuscout finds no GPU",
        )
    return out


def summarize(nodes: Sequence[NodeResult]) -> Summary:
    """The cluster's ``Summary`` from its nodes' results."""
    by_status: dict[str, int] = {str(s): 0 for s in NodeStatus}
    models: dict[tuple[str, str], list[int]] = {}
    memory: dict[str, list[int]] = {}
    devices = 0
    found: list[Disagreement] = []
    for node in nodes:
        by_status[str(node.status)] += 1
        seen: set[tuple[str, str]] = set()
        for d in node.devices:
            devices += 1
            key = (d.library, model_name(d))
            entry = models.setdefault(key, [0, 0])
            entry[0] += 1
            if key not in seen:
                seen.add(key)
                entry[1] += 1
            mem = memory.setdefault(d.library, [0, 0, 0, 0, 0])
            mem[0] += 1
            mem[1] += d.total_memory
            if d.free_memory_unknown:  # never counted as free (docs/selection.md)
                mem[3] += 1
                mem[4] += d.total_memory
            else:
                mem[2] += d.free_memory
        found.extend(disagreements(node))
    return Summary(
        nodes=len(nodes),
        nodes_by_status=by_status,
        devices=devices,
        models=tuple(ModelCount(lib, name, c, n) for (lib, name), (c, n) in sorted(models.items())),
        memory=tuple(LibraryMemory(lib, *figures) for lib, figures in sorted(memory.items())),
        disagreements=tuple(found),
    )


# -- JSON -----------------------------------------------------------------------------------------


def node_json(node: NodeResult) -> dict[str, Any]:
    """One node as the ``nodes`` entry of ``gpuscout cluster --json``."""
    from gpuscout._records.encode import unstructure

    found = node.discovery
    return {
        "node_id": node.node_id,
        "hostname": node.hostname,
        "address": node.address,
        "status": str(node.status),
        "reason": node.reason,
        "ray": {"resources": dict(node.ray_resources), "accelerator_type": node.accelerator_type or None},
        "gpuscout_version": node.version,
        "ran_on": node.ran_on,
        "pid": node.pid,
        "devices": unstructure(found.devices) if found else [],
        "dropped": [unstructure(d) for d in found.dropped] if found else [],
        "system": (unstructure(found)["system"] if found else None),
        "problems": node.problems(),
        "notes": list(node.notes),
        "visible_env": dict(node.visible_env),
        "elapsed_ms": round(node.elapsed * 1000, 3),
    }


def summary_json(summary: Summary, elapsed: float = 0.0) -> dict[str, Any]:
    """The ``summary`` of ``gpuscout cluster --json`` (``elapsed``: the inventory's seconds)."""
    return {
        "elapsed_ms": round(elapsed * 1000, 3),
        "nodes": summary.nodes,
        "nodes_by_status": dict(summary.nodes_by_status),
        "devices": summary.devices,
        "models": [attrs.asdict(m) for m in summary.models],
        "memory": {
            m.library: {
                "devices": m.devices,
                "total_memory": m.total_memory,
                "free_memory": m.free_memory,
                "free_unknown_devices": m.free_unknown_devices,
                "free_unknown_total_memory": m.free_unknown_total_memory,
            }
            for m in summary.memory
        },
        "disagreements": [attrs.asdict(d) for d in summary.disagreements],
    }


def inventory_json(found: Inventory) -> dict[str, Any]:
    """The whole ``gpuscout cluster --json`` document: ``{"nodes": [...], "summary": {...}}``."""
    return {
        "nodes": [node_json(n) for n in found.nodes],
        "summary": summary_json(found.summary, found.elapsed),
    }


__all__ = [
    "RAY_GPU_LIBRARIES",
    "Disagreement",
    "Inventory",
    "LibraryMemory",
    "ModelCount",
    "NodeResult",
    "NodeStatus",
    "Summary",
    "disagreements",
    "inventory_json",
    "node_json",
    "summarize",
    "summary_json",
    "type_matches",
]
