"""Vulkan enumeration: ask the loader (in this process or in a child), then apply
GGML_VK_VISIBLE_DEVICES.

The loader reads its settings (VK_DRIVER_FILES, VK_ICD_FILENAMES, VK_LOADER_*, XDG_*, Mesa's
device-select variables, ...) from the process environment, while a plugin must honour
``context.env``. When ``context.env`` equals this process's environment (the CLI, and any host
that passes no ``env``) the loader is called in-process: the fast common path. When it differs,
the probe runs in a child started with exactly ``context.env`` (``python -E -s -S loader.py``,
which imports only the standard library: tens of milliseconds). Setting the variables in
``os.environ`` for the duration instead was rejected: ``setenv`` is not thread-safe against
``getenv`` in other threads (the other plugins enumerate concurrently) and the change would leak
to the host. The child also keeps a crashing driver away from the host.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from gpuscout.plugin import Context, DeviceInfo, RecordingError
from gpuscout.plugins.vulkan import diagnosis as diagnose
from gpuscout.plugins.vulkan import loader
from gpuscout.plugins.vulkan.default_set import hidden_indices, reported_indices
from gpuscout.plugins.vulkan.devices import to_device_info
from gpuscout.plugins.vulkan.intel import with_sysfs_vram
from gpuscout.plugins.vulkan.loader import ProbeResult
from gpuscout.plugins.vulkan.names import VISIBLE_ENV
from gpuscout.plugins.vulkan.visibility import select_indices

#: Variables gpuscout itself reads; a difference in them does not need a child.
_OWN_VARIABLES = (VISIBLE_ENV,)
_OWN_PREFIX = "GPUSCOUT_"
#: Deadline for the child when the context has none.
DEFAULT_CHILD_TIMEOUT = 10.0


def _loader_view(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in _OWN_VARIABLES and not k.startswith(_OWN_PREFIX)}


def needs_child(env: Mapping[str, str], process_env: Mapping[str, str]) -> bool:
    """True when the loader in this process would see another environment than ``env``."""
    return _loader_view(env) != _loader_view(process_env)


def probe_in_child(context: Context, portability: bool) -> ProbeResult:
    """Run the loader probe in a child whose whole environment is ``context.env``."""
    left = context.time_left()
    timeout = DEFAULT_CHILD_TIMEOUT if left is None else max(left, 0.05)
    if not sys.executable:
        return ProbeResult(error="no Python executable to run the Vulkan probe child with")
    # -E -s -S rather than -I: the script's folder must come first on sys.path (vkstructs).
    args = [sys.executable, "-E", "-s", "-S", loader.__file__]
    if portability:
        args.append("--portability")
    try:
        proc = subprocess.run(
            args, env=dict(context.env), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(error=f"the Vulkan probe child did not answer within {timeout:.2f} s")
    except OSError as exc:
        return ProbeResult(error=f"could not start the Vulkan probe child: {exc}")
    if proc.returncode != 0:
        how = (
            f"died of signal {-proc.returncode}"
            if proc.returncode < 0
            else f"exited with status {proc.returncode}"
        )
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return ProbeResult(error=f"the Vulkan probe child {how} {tail[0]}".rstrip())
    lines = proc.stdout.strip().splitlines()
    try:
        return ProbeResult.from_json(lines[-1])
    except (IndexError, ValueError, TypeError, KeyError) as exc:
        return ProbeResult(error=f"the Vulkan probe child answered something unreadable: {exc}")


def replayed(context: Context) -> ProbeResult:
    """The loader's answer as the recording holds it (``answers/vulkan.json`` key ``probe``:
    what ``ProbeResult.to_json`` writes)."""
    answer = context.recorded("probe")
    if answer is None:
        return ProbeResult(error="the recording holds no answer of the Vulkan loader")
    try:
        _check_answer(answer)
        return ProbeResult.from_json(json.dumps(answer))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RecordingError(
            f"answers/vulkan.json: probe: not what the Vulkan probe answers ({type(exc).__name__}: {exc})"
        ) from None


#: The JSON type of each recorded field of a device (``loader.RawDevice``).
_DEVICE_FIELDS: dict[str, str] = {
    "index": "int",
    "name": "str",
    "device_type": "int",
    "vendor_id": "int",
    "device_id": "int",
    "api_version": "int",
    "driver_version": "int",
    "extensions": "list[str]",
    "uuid": "str",
    "driver_id": "int",
    "driver_name": "str",
    "driver_info": "str",
    "pci": "list[int]?",
    "heaps": "list[list[int]]",
    "heap_budget": "list[int]?",
    "heap_usage": "list[int]?",
    "storage_16bit": "bool?",
    "max_storage_buffer_range": "int",
}


#: deviceUUID as the loader records it: 16 bytes, 32 hex digits.
_UUID_HEX = re.compile(r"[0-9a-fA-F]{32}")


def _is(value: Any, kind: str) -> bool:
    if kind.endswith("?"):
        return value is None or _is(value, kind[:-1])
    if kind.startswith("list["):
        return isinstance(value, list) and len(value) <= 4096 and all(_is(v, kind[5:-1]) for v in value)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64
    return isinstance(value, {"str": str, "bool": bool}[kind])


def _check_answer(answer: Any) -> None:
    """Raise ValueError naming the first field of a recorded probe that has the wrong type."""
    if not isinstance(answer, dict) or not isinstance(answer.get("devices"), list):
        raise ValueError("expected an object with a list 'devices'")
    for key, kind in (("error", "str"), ("instance_version", "int"), ("library", "str")):
        if key in answer and not _is(answer[key], kind):
            raise ValueError(f"{key} must be {kind}")
    for i, device in enumerate(answer["devices"]):
        if not isinstance(device, dict):
            raise ValueError(f"devices[{i}] must be an object")
        for key, value in device.items():
            field = _DEVICE_FIELDS.get(key)
            if field is None:
                raise ValueError(f"devices[{i}].{key}: not a field of a Vulkan device")
            if not _is(value, field):
                raise ValueError(f"devices[{i}].{key} must be {field}, got {value!r:.40}")
        # Every physical device has at least one memory heap (the spec's memoryHeapCount >= 1),
        # each written as [size, flags]; without one its memory would replay as 0 B unexplained.
        heaps = device.get("heaps")
        if not heaps:
            raise ValueError(
                f"devices[{i}].heaps: a Vulkan device has at least one memory heap, got {heaps!r:.40}"
            )
        if any(len(heap) != 2 for heap in heaps):
            raise ValueError(f"devices[{i}].heaps: each heap is [size, flags], got {heaps!r:.60}")
        uuid = device.get("uuid", "")
        if uuid and _UUID_HEX.fullmatch(uuid) is None:
            # The loader writes deviceUUID's 16 bytes as 32 hex digits, or "" without one.
            raise ValueError(f"devices[{i}].uuid must be 32 hex digits or empty, got {uuid!r:.40}")


def probe(context: Context) -> ProbeResult:
    """The loader's devices as ``context.env`` would show them (in-process when it can)."""
    if context.replaying:
        return replayed(context)
    result = _probe_live(context)
    context.record("probe", json.loads(result.to_json()))
    return result


def _probe_live(context: Context) -> ProbeResult:
    portability = context.platform == "darwin"
    if needs_child(context.env, os.environ):
        context.log.debug("vulkan.probe", mode="child")
        return probe_in_child(context, portability)
    context.log.debug("vulkan.probe", mode="in_process")
    return loader.probe(portability=portability)


def enumerate_devices(context: Context) -> list[DeviceInfo]:
    """Every device the loader lists, ggml-vulkan's default set first (notes name the others),
    or those GGML_VK_VISIBLE_DEVICES names, in its order; then those it leaves out, marked
    ``hidden_by``, with ids after the others' (the core drops them). Set but empty it asks no
    loader at all (the user turned Vulkan off, perhaps for a driver that hangs), so nothing is
    reported hidden.

    Never raises for a missing loader or driver: zero devices and a note naming the Vulkan error.
    """
    if context.platform != sys.platform and not context.replaying:
        context.note(
            f"Vulkan: platform {context.platform!r} is not the running one "
            f"({sys.platform!r}), so its loader cannot be asked"
        )
        return []
    visible = context.env.get(VISIBLE_ENV)
    if visible is not None and not visible.strip():
        context.note(select_indices(visible, 0)[1])
        return []
    result = probe(context)
    if result.error:
        context.note(f"Vulkan: {result.error}")
        diagnose.explain_no_device(context)
        return []
    if not result.devices:
        context.note(f"Vulkan: the loader ({result.library}) lists no physical device")
        diagnose.explain_no_device(context)
        return []
    indices, notes, unused = reported_indices(result.devices, visible)
    for note in notes:
        context.note(note)
    shown = [
        with_sysfs_vram(
            context,
            to_device_info(result.devices[index], ordinal, context.platform),
            result.devices[index].vendor_id,
        ).evolve(unused_reason=unused.get(index, ""))
        for ordinal, index in enumerate(indices)
    ]
    hidden = hidden_indices(result.devices, visible, indices)
    return shown + [
        to_device_info(result.devices[index], ordinal, context.platform).evolve(hidden_by=why)
        for ordinal, (index, why) in enumerate(hidden.items(), len(shown))
    ]
