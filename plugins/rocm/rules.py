"""ROCm's visibility rules from the seed, as pure functions over plain inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuscout.plugin import DeviceInfo, EnvEntry
from gpuscout.plugins.rocm.names import CUDA, HIP, LIBRARY, OPENCL_ORDINAL, ROCR

#: Variables that may carry a numeric device list, in the order the seed consults them.
NUMERIC_CANDIDATES = (HIP, OPENCL_ORDINAL, CUDA)


def numeric_device_list(value: str) -> bool:
    """True for a comma list of non-negative integers with at least one entry (blanks ignored)."""
    found = False
    for field in value.split(","):
        field = field.strip()
        if not field:
            continue
        try:
            if int(field) < 0:
                return False
        except ValueError:
            return False
        found = True
    return found


def _first_numeric(env: Mapping[str, str]) -> str:
    for name in NUMERIC_CANDIDATES:
        if numeric_device_list(env.get(name, "")):
            return name
    return ""


def linux_ordinal_variable(env: Mapping[str, str]) -> str:
    """On Linux, the variable that also needs the child's ordinal, or "" for none.

    None when the user set ROCR_VISIBLE_DEVICES (ROCr then renumbers); else the first of
    HIP_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL, CUDA_VISIBLE_DEVICES that already holds a numeric
    list, since HIP would otherwise apply the parent's numbers to the child's renumbered devices;
    where that is CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES instead (``_hip_for_cuda``).
    """
    if env.get(ROCR, ""):
        return ""
    return _hip_for_cuda(_first_numeric(env))


def _hip_for_cuda(name: str) -> str:
    """``name``, except that the seed's CUDA_VISIBLE_DEVICES becomes HIP_VISIBLE_DEVICES: an
    intended fix over the seed. HIP reads its own variable before CUDA's, so the ordinal there
    selects the AMD GPU as well, while the CUDA runtime, which reads CUDA_VISIBLE_DEVICES too,
    would take an AMD ordinal for an NVIDIA GPU (a Radeon's ``0`` showed an RTX 4090 to the
    child, and ``--isolate`` could not hide it: the variable was the selection's)."""
    return HIP if name == CUDA else name


def inherited_ordinal_variables(env: Mapping[str, str], written: str) -> list[str]:
    """On Linux, the variables besides the seed's ``written`` one (``linux_ordinal_variable``)
    that also need the child's ordinals, because the child inherits them from ``env`` and they
    would index into its new ROCr list: an intended fix over the seed, which writes none when
    ROCR_VISIBLE_DEVICES is set.

    A Slurm job with AMD gres has ROCR_VISIBLE_DEVICES=2,3; if HIP_VISIBLE_DEVICES=1 is set too
    the job sees GPU 3 alone, and a child given ROCR_VISIBLE_DEVICES=<GPU 3's UUID> that kept
    HIP_VISIBLE_DEVICES=1 would ask HIP for the second GPU of a one-GPU list: none. So whenever
    HIP applies a list (its own, or CUDA_VISIBLE_DEVICES when its own is empty) that the seed's
    rule did not rewrite, HIP_VISIBLE_DEVICES gets the ordinals (HIP then ignores CUDA's); and
    a set GPU_DEVICE_ORDINAL does too (ROCm's docs say HIP reads it, ROCclr reads it for OpenCL).
    """
    out: list[str] = []
    hip_reads = HIP if env.get(HIP, "") else CUDA if env.get(CUDA, "") else ""
    if hip_reads and written != HIP:
        out.append(HIP)
    if env.get(OPENCL_ORDINAL, "") and written != OPENCL_ORDINAL:
        out.append(OPENCL_ORDINAL)
    return out


def non_linux_variable(env: Mapping[str, str]) -> str:
    """Off Linux there is no ROCr filter: the first numeric candidate, else HIP_VISIBLE_DEVICES."""
    return _hip_for_cuda(_first_numeric(env)) or HIP


def visible_entries(selection: Sequence[DeviceInfo], env: Mapping[str, str], platform: str) -> list[EnvEntry]:
    """The seed's updateVisibleDevicesEnv for every ROCm device of ``selection``, plus (Linux)
    the child's ordinals in the inherited variables that would otherwise index into its ROCr
    list (``inherited_ordinal_variables``)."""
    ordinal_variables: list[str] = []
    if platform == "linux":
        variable, seed_ordinal = ROCR, linux_ordinal_variable(env)
        ordinal_variables = [v for v in (seed_ordinal,) if v]
        ordinal_variables += inherited_ordinal_variables(env, seed_ordinal)
    else:
        variable = non_linux_variable(env)
    entries: list[EnvEntry] = []
    ordinal = 0
    for i, d in enumerate(selection):
        if d.library != LIBRARY:
            continue
        token = d.filter_id or d.id
        entries.append(EnvEntry(i, variable, token))
        entries.extend(EnvEntry(i, name, str(ordinal)) for name in ordinal_variables)
        # The child's ordinal counts the non-blank tokens already in the variable.
        if token.strip():
            ordinal += 1
    return entries
