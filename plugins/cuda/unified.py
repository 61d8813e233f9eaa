"""Unified-memory NVIDIA parts (GB10, Jetson): which GPUs are integrated, and their free memory.

NVML has no "integrated" attribute and often no memory figures for such a part: the CUDA driver
is asked (one probe child, ``order.probe_driver``) only where NVML may be hiding one, and the free
memory of an integrated part is the system's, counted by ggml's rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from gpuscout.plugin import Context, SystemInfo, parse_u64, system_memory
from gpuscout.plugins.cuda.order import DriverProbe, integrated_by_address, probe_driver
from gpuscout.plugins.cuda.readings import GpuReading


def uma_free(context: Context, system: SystemInfo) -> int:
    """Free memory of a unified-memory GPU by ggml's rule
    (``ggml_backend_cuda_get_available_uma_memory``, ggml-org/llama.cpp#17368): with hugetlb
    configured (``HugePages_Total`` above 0) the free huge pages (``HugePages_Free`` times
    ``Hugepagesize``), which is all such an allocation can use; else ``MemAvailable`` (here
    ``system.free_memory``, capped by the cgroup limit as all of gpuscout's system figures)."""
    fields: dict[str, int] = {}
    for line in (context.read_text("/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if key in ("HugePages_Total", "HugePages_Free", "Hugepagesize") and words:
            value = parse_u64(words[0])
            if value is not None:
                fields[key] = value * 1024 if key == "Hugepagesize" else value
    if fields.get("HugePages_Total", 0) > 0 and "Hugepagesize" in fields:
        return fields.get("HugePages_Free", 0) * fields["Hugepagesize"]
    return system.free_memory


def uma_system(context: Context) -> SystemInfo:
    """System memory as a unified-memory GPU sees it: free by ``uma_free``, within the total."""
    system = system_memory(context)
    if not system.total_memory:
        return system
    return attrs.evolve(system, free_memory=min(uma_free(context, system), system.total_memory))


def ask_integrated(
    gpus: Sequence[GpuReading], context: Context
) -> tuple[list[GpuReading], DriverProbe | None]:
    """``gpus`` with the driver's integrated attribute where NVML may be hiding a unified part.

    Only then is the driver asked (one probe child, shared with the order): NVML has no
    "integrated" attribute. Most integrated NVIDIA parts (GB10 on driver 580, Jetson) refuse
    memory info, but some GB10 drivers answer it with the system's own memory
    (XuehaiPan/nvitop#208, leptonai/gpud#1170): so the driver is asked for a GPU without NVML
    memory figures and for one whose compute capability only integrated parts have
    (``_maybe_unified``); any other GPU with NVML memory figures is taken as discrete.
    """
    doubtful = _maybe_unified(gpus)
    if not doubtful:
        return list(gpus), None
    probe = probe_driver(context)
    if probe.rows is None:
        context.note(
            "NVML has no memory figures for a GPU (or it has an integrated part's compute "
            "capability) and the CUDA driver could not say whether it is integrated "
            f"({probe.reason}); taken as integrated"
        )
        # None reads as integrated for a GPU without NVML figures (readings._memory_fields);
        # one with figures is doubtful only for its integrated-only compute capability.
        return [attrs.evolve(g, integrated=True) if g.index in doubtful else g for g in gpus], probe
    answers = integrated_by_address(probe.rows)
    found = [
        attrs.evolve(g, integrated=answers.get((g.pci.domain, g.pci.bus, g.pci.device)))
        if g.index in doubtful
        else g
        for g in gpus
    ]
    return found, probe


#: Compute capabilities NVIDIA gives only to integrated (unified-memory) parts: Tegra K1 3.2,
#: X1/Nano 5.3, X2 6.2, Xavier 7.2, Orin 8.7, Thor 10.1 (11.0 since CUDA 13), GB10 12.1
#: (CUDA C++ Programming Guide, compute capabilities table; NVIDIA's Jetson and DGX Spark
#: documents).
UNIFIED_COMPUTE = frozenset({(3, 2), (5, 3), (6, 2), (7, 2), (8, 7), (10, 1), (11, 0), (12, 1)})


def _maybe_unified(gpus: Sequence[GpuReading]) -> set[int]:
    """NVML indices of the GPUs the driver is asked about: no NVML memory figures, or a compute
    capability only integrated parts have (not in MIG mode: MIG is discrete only)."""
    return {
        g.index
        for g in gpus
        if not g.mig_enabled and (g.memory is None or (g.compute_major, g.compute_minor) in UNIFIED_COMPUTE)
    }
