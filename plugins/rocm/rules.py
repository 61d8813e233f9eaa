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
    list, since HIP would otherwise apply the parent's numbers to the child's renumbered devices.
    """
    if env.get(ROCR, ""):
        return ""
    return _first_numeric(env)


def non_linux_variable(env: Mapping[str, str]) -> str:
    """Off Linux there is no ROCr filter: the first numeric candidate, else HIP_VISIBLE_DEVICES."""
    return _first_numeric(env) or HIP


def visible_entries(
    selection: Sequence[DeviceInfo], env: Mapping[str, str], platform: str
) -> list[EnvEntry]:
    """The seed's updateVisibleDevicesEnv for every ROCm device of ``selection``."""
    if platform == "linux":
        variable, ordinal_variable = ROCR, linux_ordinal_variable(env)
    else:
        variable, ordinal_variable = non_linux_variable(env), ""
    entries: list[EnvEntry] = []
    ordinal = 0
    for i, d in enumerate(selection):
        if d.library != LIBRARY:
            continue
        token = d.filter_id or d.id
        entries.append(EnvEntry(i, variable, token))
        if ordinal_variable:
            entries.append(EnvEntry(i, ordinal_variable, str(ordinal)))
        # The child's ordinal counts the non-blank tokens already in the variable.
        if token.strip():
            ordinal += 1
    return entries
