"""AMD GPUs under WSL2: what the ROCm runtime needs there, and what gpuscout cannot read.

In WSL2 an AMD GPU is reached through dxgkrnl's ``/dev/dxg`` and AMD's DXG thunk (librocdxg),
not through amdgpu: there is no ``/dev/kfd``, no KFD topology under ``/sys/class/kfd`` and no
AMD PCI function under ``/sys/bus/pci``, so the bare-metal diagnostics would only mislead.
ROCr looks for ``/dev/dxg`` only when ``HSA_ENABLE_DXG_DETECTION=1`` before ROCm 7.13; from
7.13 on detection is on unless the variable is ``0`` (ROCm/rocm-systems#7320,
``projects/rocr-runtime/runtime/docs/data/env_variables.rst``; AMD in ROCm/librocdxg#34: "is to
pair with rocm prev 7.13"; unslothai/unsloth#9729: ``rocminfo`` fails with it unset on 7.2.1).
Either way gpuscout itself cannot enumerate such a GPU: it reads the KFD topology or amdsmi,
and WSL2 has the first not at all and the second only in part.
"""

from __future__ import annotations

from gpuscout.plugin import DXG_NODE, Context, is_wsl2

#: ROCr's switch for the DXG path on WSL2.
DXG_ENV = "HSA_ENABLE_DXG_DETECTION"
#: ``hsakmt.KFD_DEVICE``, said again so that this module imports nothing of the plugin's.
KFD_DEVICE = "/dev/kfd"


def wsl_sentence(context: Context) -> str:
    """On WSL2 without ``/dev/kfd`` and with ``/dev/dxg``: why no AMD GPU is reported, naming
    ``HSA_ENABLE_DXG_DETECTION`` as the runtime needs it; '' anywhere else."""
    if context.platform != "linux" or not is_wsl2(context):
        return ""
    if context.device_node(KFD_DEVICE) != "missing" or context.device_node(DXG_NODE) == "missing":
        return ""
    value = context.env.get(DXG_ENV)
    cannot = (
        "gpuscout reads the KFD topology or amdsmi, neither of which WSL2 provides, so it "
        "reports no ROCm device (the Vulkan plugin may still list the GPU)"
    )
    if value is not None and value.strip() == "1":
        return (
            f"WSL2: {DXG_ENV}=1 is set, so a ROCm child (ROCr with librocdxg) finds the GPU "
            f"through {DXG_NODE}; {cannot}"
        )
    said = "is unset" if value is None else f"is {value.strip()[:20]!r}"
    return (
        f"WSL2: GPUs are behind {DXG_NODE} here, not {KFD_DEVICE}; ROCr looks for an AMD one "
        f"there only with {DXG_ENV}=1 (needed before ROCm 7.13; here it {said}), so set "
        f"{DXG_ENV}=1 for a ROCm child; {cannot}"
    )
