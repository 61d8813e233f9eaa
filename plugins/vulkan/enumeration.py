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
import sys
from collections.abc import Mapping

from gpuscout.plugin import Context, DeviceInfo
from gpuscout.plugins.vulkan import diagnosis, loader
from gpuscout.plugins.vulkan.default_set import hidden_indices, reported_indices
from gpuscout.plugins.vulkan.devices import to_device_info
from gpuscout.plugins.vulkan.intel import with_sysfs_vram
from gpuscout.plugins.vulkan.loader import ProbeResult
from gpuscout.plugins.vulkan.names import VISIBLE_ENV
from gpuscout.plugins.vulkan.replay import replayed
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
    import subprocess  # only a child probe pays for it (about 2 ms of a plain `list`)

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
        diagnosis.explain_no_device(context)
        return []
    if not result.devices:
        context.note(f"Vulkan: the loader ({result.library}) lists no physical device")
        diagnosis.explain_no_device(context)
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
