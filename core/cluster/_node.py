"""What runs on each node of a cluster inventory: one discovery with the gpuscout installed
there, answered as plain JSON so that nodes with another gpuscout version still understand and
are understood (no pickled gpuscout objects cross the network).

The Ray task that calls ``report`` carries no gpuscout code of its own (``gpuscout.cluster.ray``
sends a few lines that import this module on the node). Discovery runs isolated by default: a
Ray worker lives on after the task and serves other jobs, so no driver is loaded into it, and a
driver that crashes costs its plugin, not the worker.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: The visibility variables the built-in plugins read. Ray may overwrite some of them in a task
#: that was given no accelerators (``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO``); see ``node_env``.
VISIBILITY_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "GGML_VK_VISIBLE_DEVICES",
)
#: Ray's switch that makes a zero-accelerator task see its visibility variables set to "".
RAY_OVERRIDE_ON_ZERO = "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"
#: The version of the answer's layout; the host refuses a layout it does not know.
REPORT_FORMAT = 1


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def start_environ(path: str = "/proc/self/environ") -> dict[str, str] | None:
    """The environment this process was started with (Linux), before anything in it (Ray's task
    set-up) changed ``os.environ``; None where it cannot be read."""
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 22)
    except OSError:
        return None
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            out[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return out


def node_env(
    environ: Mapping[str, str], started: Mapping[str, str] | None
) -> tuple[dict[str, str], list[str]]:
    """The environment discovery should see on this node, and notes on what was restored.

    A Ray task given no GPUs normally keeps the node's visibility variables. With
    ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO`` set, Ray sets them to "" for the task, which would make
    every GPU look hidden; the node's own values are then taken from the process's start-up
    environment (``started``), where Ray's per-task change does not reach.
    """
    env = dict(environ)
    notes: list[str] = []
    if not _truthy(environ.get(RAY_OVERRIDE_ON_ZERO)) or started is None:
        return env, notes
    for name in VISIBILITY_VARIABLES:
        if environ.get(name) != "" or started.get(name) == "":
            continue
        if name in started:
            env[name] = started[name]
        else:
            del env[name]
        was = repr(started[name]) if name in started else "unset"
        notes.append(
            f"Ray set {name}='' for this zero-GPU task ({RAY_OVERRIDE_ON_ZERO}); "
            f"discovery used the node's own value ({was})"
        )
    return env, notes


def report(options: Mapping[str, Any], node_id: str = "") -> str:
    """Run one discovery on this node as ``options`` say and return the answer as JSON text:
    ``{"format", "node_id", "hostname", "pid", "version", "elapsed", "notes", "visible_env",
    "discovery"}`` (``discovery`` is the ``gpuscout list --json`` document)."""
    from gpuscout._records.encode import unstructure
    from gpuscout.scout import Scout
    from gpuscout.version import VERSION

    start = time.monotonic()
    env, notes = node_env(os.environ, start_environ())
    plugins: Sequence[str] | None = options.get("plugins")
    isolated = bool(options.get("isolated", True))
    scout = Scout(
        plugins=plugins,
        disable=tuple(options.get("disable", ())),
        env=env,
        enumerate_timeout=float(options.get("enumerate_timeout", 15.0)),
        isolate_imports=isolated,
    )
    found = scout.discover(include_software=bool(options.get("include_software", False)), isolated=isolated)
    notes.extend(scout.warnings)
    return json.dumps(
        {
            "format": REPORT_FORMAT,
            "node_id": node_id,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "version": VERSION,
            "elapsed": time.monotonic() - start,
            "notes": notes,
            "visible_env": {k: env[k] for k in VISIBILITY_VARIABLES if k in env},
            "discovery": unstructure(found),
        }
    )


__all__ = ["REPORT_FORMAT", "VISIBILITY_VARIABLES", "node_env", "report", "start_environ"]
