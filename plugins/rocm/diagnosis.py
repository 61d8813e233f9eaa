"""Why the ROCm plugin found no AMD GPU, beyond what ``enumeration`` already notes: asked only
when it found none.

``enumeration`` names the KFD topology it could not read and the device file libhsakmt could not
open; this adds what explains it: the AMD GPUs on the PCI bus and the driver each is bound to,
and whether ``/dev/kfd`` and ``/dev/dri/renderD*`` are missing or refused to this process. All
of it is read through the context (a recorded tree explains itself as a live machine does).
"""

from __future__ import annotations

import re

from gpuscout.plugin import PCI_DEVICES, Context, binding_problem, is_wsl2, pci_gpus

#: ``hsakmt.KFD_DEVICE``, said again so that this module imports nothing of the plugin's (the
#: driverless short path in ``__init__`` may import it cheaply).
KFD_DEVICE = "/dev/kfd"

AMD_VENDOR = 0x1002
VENDOR_LABEL = "AMD"
#: The kernel module the HSA runtime needs bound to a GPU.
MODULES = ("amdgpu",)
#: Drivers that may hold an AMD GPU instead, and what that means for ROCm.
OTHER_DRIVERS = {"radeon": "which ROCm cannot use (it needs amdgpu)"}
DRI = "/dev/dri"
#: The most GPUs (PCI functions, render nodes) described one by one.
MAX_DESCRIBED = 8
_RENDER = re.compile(r"renderD[0-9]{1,3}")


def _nodes(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _denied(names: list[str]) -> str:
    verb, it = ("is", "it") if len(names) == 1 else ("are", "them")
    return (
        f"{_nodes(names)} {verb} present but this process lacks access to {it} (not in "
        "the render or video group, or a container started without the device?)"
    )


def pci_problems(context: Context, topology: bool) -> list[str]:
    """One sentence per AMD GPU on the PCI bus that KFD does not show (``topology``: whether a
    KFD topology exists at all), or one saying the bus holds none; [] when it cannot be listed."""
    gpus = pci_gpus(context, AMD_VENDOR)
    if gpus is None:
        return []
    if not gpus:
        return [f"no AMD GPU on the PCI bus ({PCI_DEVICES} lists none)"]
    found: list[str] = []
    for gpu in gpus[:MAX_DESCRIBED]:
        problem = binding_problem(context, gpu, VENDOR_LABEL, MODULES, OTHER_DRIVERS)
        if not problem and topology:
            problem = (
                f"{gpu.describe(VENDOR_LABEL)} is bound to amdgpu but KFD lists no GPU "
                "node for it (a GPU that KFD does not support?)"
            )
        elif not problem:
            problem = (
                f"{gpu.describe(VENDOR_LABEL)} is bound to amdgpu, yet there is no KFD "
                "topology (a kernel built without CONFIG_HSA_AMD?)"
            )
        found.append(problem)
    if len(gpus) > MAX_DESCRIBED:
        found.append(f"{len(gpus) - MAX_DESCRIBED} more AMD GPUs on the PCI bus not described")
    return found


def kfd_problem(context: Context) -> str:
    """Why ``/dev/kfd`` cannot be used: missing, or present and not permitted; '' otherwise."""
    state = context.device_node(KFD_DEVICE)
    if state == "denied":
        return _denied([KFD_DEVICE])
    if state == "missing":
        return (
            f"{KFD_DEVICE} is missing (amdgpu not loaded, or a container started without "
            f"--device {KFD_DEVICE}?)"
        )
    return ""


def render_problem(context: Context) -> str:
    """Why no render node under ``/dev/dri`` can be used: none there, or refused; '' otherwise."""
    names = sorted(
        (n for n in context.list_dir(DRI) or [] if _RENDER.fullmatch(n)),
        key=lambda n: int(n[len("renderD") :]),
    )[:MAX_DESCRIBED]
    states = {f"{DRI}/{n}": context.device_node(f"{DRI}/{n}") for n in names}
    denied = [p for p, s in states.items() if s == "denied"]
    if denied:
        return _denied(denied)
    if not any(s == "present" for s in states.values()):
        return f"no {DRI}/renderD* node is present (a container started without --device {DRI}?)"
    return ""


def explain_no_topology(context: Context, topology: bool) -> None:
    """Notes, beside "no KFD topology" / "no KFD GPU nodes", what the PCI bus shows; on WSL2
    (``/dev/dxg``, no ``/dev/kfd``) what the ROCm runtime needs there instead."""
    wsl = ""
    if is_wsl2(context):
        from gpuscout.plugins.rocm.wsl import wsl_sentence

        wsl = wsl_sentence(context)
    if wsl:  # WSL2 has no AMD PCI function nor KFD: the bus would say "no AMD GPU"
        context.note(wsl)
        return
    for sentence in pci_problems(context, topology):
        context.note(sentence)


def explain_render_failure(context: Context) -> None:
    """Notes, beside the render nodes libhsakmt could not open, whether they are missing or
    refused to this process."""
    sentence = render_problem(context)
    if sentence:
        context.note(sentence)
