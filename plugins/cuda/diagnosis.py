"""Why NVML found no NVIDIA GPU, said in the plugin's note: asked only when it found none.

Each reason is one sentence naming what was looked at: the container runtime's variables (in
``context.env``), the device nodes ``/dev/nvidiactl`` and ``/dev/nvidia<N>``, and the NVIDIA
GPUs on the PCI bus with the driver each is bound to. Everything is read through the context,
so a recorded tree explains itself as a live machine does; all of it is a few sysfs reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuscout.plugin import PCI_DEVICES, Context, binding_problem, is_wsl2, pci_gpus

NVIDIA_VENDOR = 0x10DE
VENDOR_LABEL = "NVIDIA"
#: The kernel module NVML needs bound to a GPU.
MODULES = ("nvidia",)
#: Drivers that may hold an NVIDIA GPU instead, and what that means for NVML.
OTHER_DRIVERS = {"nouveau": "which NVML cannot use"}
NVML_LIBRARY = "libnvidia-ml.so.1"
CONTROL_NODE = "/dev/nvidiactl"
PROC_DRIVER = "/proc/driver/nvidia"
#: nvidia-container-toolkit's variables (read from ``context.env``, never the process's).
CONTAINER_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
CAPABILITIES_ENV = "NVIDIA_DRIVER_CAPABILITIES"
#: NVML_ERROR_UNKNOWN, what nvmlInit answers once a container lost access to its devices.
UNKNOWN_ERROR = 999
#: The most GPUs (PCI functions, device nodes) described one by one.
MAX_DESCRIBED = 8
_GPU_NODE = re.compile(r"nvidia[0-9]{1,3}")


def _is_linux(context: Context) -> bool:
    return context.platform.startswith("linux")


def exposed_no_gpu(env: Mapping[str, str]) -> str:
    """The sentence for NVIDIA_VISIBLE_DEVICES=void, none or empty; '' for any other value."""
    value = env.get(CONTAINER_DEVICES_ENV)
    if value is None or value.strip().lower() not in ("", "void", "none"):
        return ""
    shown = f"={value.strip()}" if value.strip() else " is set but empty"
    return (
        f"{CONTAINER_DEVICES_ENV}{shown}: the NVIDIA container runtime exposes no GPU to a "
        "container started with this value"
    )


def lacks_utility(env: Mapping[str, str]) -> str:
    """The sentence for NVIDIA_DRIVER_CAPABILITIES set without ``utility`` or ``all``; ''
    otherwise (unset or empty means the runtime's default, which includes utility)."""
    value = (env.get(CAPABILITIES_ENV) or "").strip()
    if not value or {c.strip() for c in value.split(",")} & {"utility", "all"}:
        return ""
    return (
        f"{CAPABILITIES_ENV}={value[:80]} lacks utility (or all): the NVIDIA container "
        f"runtime mounts NVML ({NVML_LIBRARY}) into a container only with the utility "
        "capability"
    )


def _nodes(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def device_node_problems(context: Context) -> tuple[list[str], list[str]]:
    """(sentences about missing or refused device nodes, the nodes that exist when both the
    control node and a GPU node do, else [])."""
    gpu_nodes = sorted(
        (n for n in context.list_dir("/dev") or [] if _GPU_NODE.fullmatch(n)),
        key=lambda n: int(n[len("nvidia") :]),
    )
    states = {
        path: context.device_node(path)
        for path in [CONTROL_NODE, *(f"/dev/{n}" for n in gpu_nodes[:MAX_DESCRIBED])]
    }
    existing = [p for p, s in states.items() if s != "missing"]
    denied = [p for p, s in states.items() if s == "denied"]
    found: list[str] = []
    if denied:
        verb, it = ("is", "it") if len(denied) == 1 else ("are", "them")
        found.append(
            f"{_nodes(denied)} {verb} present but this process lacks access to {it} "
            "(not in the video group, or a container started without the device?)"
        )
    control_missing = states[CONTROL_NODE] == "missing"
    gpus_missing = not any(states[p] != "missing" for p in states if p != CONTROL_NODE)
    why = "the nvidia module is not loaded, or a container was started without the NVIDIA devices?"
    if control_missing and gpus_missing:
        found.append(
            f"neither {CONTROL_NODE} nor any /dev/nvidia<N> exists: the NVIDIA driver "
            f"library is here but its device nodes are not ({why})"
        )
    elif control_missing:
        found.append(f"{CONTROL_NODE} is missing while /dev/nvidia<N> nodes exist: NVML needs both ({why})")
    elif gpus_missing:
        found.append(
            f"{CONTROL_NODE} exists but no /dev/nvidia<N> GPU node does: no NVIDIA GPU "
            f"is exposed to this process ({why})"
        )
    return found, [] if control_missing or gpus_missing else existing


def unknown_error_hint(context: Context, existing: list[str]) -> str:
    """The hint for nvmlInit's Unknown Error while the device nodes exist (after a ``systemctl
    daemon-reload`` revoked a container's device access, opening them may be refused too)."""
    masked = context.list_dir(PROC_DRIVER) is None
    return (
        f"NVML answered Unknown Error ({UNKNOWN_ERROR}) although {_nodes(existing)} "
        f"{'is' if len(existing) == 1 else 'are'} present"
        + (f" (and {PROC_DRIVER} is not visible, as when a container masks it)" if masked else "")
        + ": in a container this is what a `systemctl daemon-reload` on the host does when "
        "it revokes the container's device access (NVIDIA/nvidia-container-toolkit#48); "
        "restarting the container restores it"
    )


def pci_problems(context: Context, bound_too: bool = False) -> list[str]:
    """One sentence per NVIDIA GPU on the PCI bus that the nvidia driver does not drive (with
    ``bound_too``, also per GPU it does), or one saying the bus holds none; [] when the bus
    cannot be listed."""
    gpus = pci_gpus(context, NVIDIA_VENDOR)
    if gpus is None:
        return []
    if not gpus:
        return [f"no NVIDIA GPU on the PCI bus ({PCI_DEVICES} lists none)"]
    found: list[str] = []
    for gpu in gpus[:MAX_DESCRIBED]:
        problem = binding_problem(context, gpu, VENDOR_LABEL, MODULES, OTHER_DRIVERS)
        if problem:
            found.append(problem)
        elif bound_too:
            found.append(f"{gpu.describe(VENDOR_LABEL)} is bound to nvidia, so the kernel driver is loaded")
    if len(gpus) > MAX_DESCRIBED and found:
        found.append(f"{len(gpus) - MAX_DESCRIBED} more NVIDIA GPUs on the PCI bus not described")
    return found


def _note_all(context: Context, sentences: list[str]) -> None:
    for sentence in sentences:
        if sentence:
            context.note(sentence)


def _explained_on_wsl2(context: Context) -> bool:
    """On WSL2, the WSL sentence in place of the bare-metal ones (WSL2 has none of the device
    nodes, PCI functions or module they look for); ``wsl`` is imported only there."""
    if not is_wsl2(context):
        return False
    from gpuscout.plugins.cuda import wsl

    return wsl.explain_missing(context)


def explain_missing_library(context: Context) -> None:
    """Notes why NVML is not here beside the library's own error: the container's variables
    and the NVIDIA GPUs on the PCI bus (Linux only)."""
    if not _is_linux(context):
        return
    if _explained_on_wsl2(context):
        return
    _note_all(
        context,
        [exposed_no_gpu(context.env), lacks_utility(context.env), *pci_problems(context, bound_too=True)],
    )


def explain_init_failure(context: Context, code: int | None) -> None:
    """Notes why nvmlInit failed (NVML return code ``code``): the container's variables, the
    device nodes, the Unknown Error hint when they are present, the PCI GPUs."""
    if not _is_linux(context):
        return
    if _explained_on_wsl2(context):
        return
    nodes, existing = device_node_problems(context)
    hint = unknown_error_hint(context, existing) if code == UNKNOWN_ERROR and existing else ""
    _note_all(context, [exposed_no_gpu(context.env), *nodes, hint, *pci_problems(context)])


def explain_no_gpu(context: Context) -> None:
    """Notes why a started NVML lists no GPU: the container's variables, the device nodes,
    the PCI GPUs."""
    if not _is_linux(context):
        return
    if _explained_on_wsl2(context):
        return
    nodes, _ = device_node_problems(context)
    _note_all(context, [exposed_no_gpu(context.env), *nodes, *pci_problems(context)])
