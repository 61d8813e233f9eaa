"""Every node of a Ray cluster, as gpuscout finds it there (``pip install 'gpuscout[ray]'``).

``inventory()`` runs one discovery on each alive node as a Ray task that asks for no CPU and no
GPU (so it never waits behind real work) and is pinned to its node
(``NodeAffinitySchedulingStrategy(node_id, soft=False)``: it runs there or not at all). The task
carries no gpuscout code: a few lines sent by value import ``gpuscout.cluster._node`` from the
gpuscout installed on the node, so a node without it answers "missing" instead of failing to
unpickle. Answers are JSON, read back with the wire format's checks.

A node that Ray lists as dead, that dies while its task runs, that does not answer in time or
that lacks gpuscout is reported with the reason; the others still count. Every task still
running at the deadline is cancelled (its worker killed) before the call returns, and an
interrupt cancels them too.

Ray's side (``gpuscout.cluster._ray_driver``) runs in a child process of its own unless this
process is already attached to Ray: Ray ends a driver whose cluster head stays unreachable, and
that must never be the host.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from gpuscout._host import children
from gpuscout._host.children import Bounded, Tail, boot_code, child_argv, exit_text, kill_group, last_words
from gpuscout.cluster._ray_driver import (
    CANCEL_GRACE,
    CONNECT_TIMEOUT,
    DEFAULT_PORT,
    INSTALL_HINT,
    RAY_LOOPBACK_ENV,
    Gathered,
    RayMissing,
    _is_loopback,
    _split,
    check_reachable,
    import_ray,
    ours,
    ray_address_file,
    resolve_address,
)
from gpuscout.cluster.inventory import Inventory, NodeResult, NodeStatus, summarize
from gpuscout.errors import GpuscoutError

#: The largest answer read from one node.
MAX_ANSWER = 16 << 20
#: Seconds the inventory's child may take beyond the timeout: its own start (an interpreter,
#: Ray's import, attaching) and the cancellations.
CHILD_ALLOWANCE = 20.0
_BOOT = boot_code("gpuscout.cluster._ray_driver", "child_main")


def read_answer(base: NodeResult, text: Any, elapsed: float) -> NodeResult:
    """``base`` completed with a node's JSON answer ``text``; an answer that is unreadable, from
    another node or in an unknown format makes the node ``failed`` with what was wrong."""
    from gpuscout._records.decode import structure
    from gpuscout._records.results import Discovery

    def failed(reason: str, status: NodeStatus = NodeStatus.FAILED) -> NodeResult:
        return attrs.evolve(base, status=status, reason=reason, elapsed=elapsed)

    if not isinstance(text, str) or len(text) > MAX_ANSWER:
        return failed(f"unreadable answer: expected JSON text up to {MAX_ANSWER} characters")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return failed(f"unreadable answer: {exc}")
    if not isinstance(doc, dict) or doc.get("format") != 1:
        return failed("unreadable answer: not a gpuscout node report of format 1")
    ran_on = str(doc.get("node_id", ""))
    if ran_on != base.node_id:
        return failed(f"the answer came from node {ran_on!r}, not from this node")
    pid = doc.get("pid")
    base = attrs.evolve(
        base,
        ran_on=ran_on,
        pid=pid if isinstance(pid, int) else 0,
        hostname=base.hostname or str(doc.get("hostname") or ""),
    )
    if "missing" in doc:
        return failed(
            f"gpuscout with cluster support is not importable by {doc.get('python', 'Python')} "
            f"on this node ({doc['missing']}); install gpuscout there",
            NodeStatus.MISSING,
        )
    if "error" in doc:
        return failed(f"discovery failed on the node: {doc['error']}")
    raw_notes, raw_env = doc.get("notes", []), doc.get("visible_env", {})
    if not (isinstance(raw_notes, list) and all(isinstance(n, str) for n in raw_notes)):
        return failed("unreadable answer: notes: expected a list of strings")
    if not (isinstance(raw_env, dict) and all(isinstance(v, str) for v in raw_env.values())):
        return failed("unreadable answer: visible_env: expected an object of strings")
    try:
        found: Discovery = structure(doc.get("discovery"), Discovery)
    except GpuscoutError as exc:
        return failed(f"unreadable answer: discovery: {exc}")
    notes, visible = tuple(raw_notes), dict(raw_env)
    return attrs.evolve(
        base,
        status=NodeStatus.OK,
        discovery=found,
        elapsed=elapsed,
        version=str(doc.get("version", "")),
        notes=notes,
        visible_env=visible,
    )


def inventory(
    address: str | None = None,
    timeout: float = 60.0,
    *,
    include_software: bool = False,
    plugins: Sequence[str] | None = None,
    disable: Sequence[str] = (),
    enumerate_timeout: float = 15.0,
    isolated: bool = True,
) -> Inventory:
    """Run gpuscout discovery once on every alive node of a Ray cluster.

    :param address: the cluster's GCS address (``host:port``), ``auto`` or a ``ray://`` client
        address; None uses the cluster this process is attached to, else ``RAY_ADDRESS`` or the
        cluster started on this machine. A process already attached stays attached; one this call
        attached is detached again.
    :param timeout: seconds from the call until the last answer is awaited; nodes that have not
        answered then are ``timeout`` and their tasks are cancelled.
    :param include_software: keep software devices (llvmpipe) in each node's list.
    :param plugins: plugins allowed on every node (None: each node's own choice).
    :param disable: plugins blocked on every node.
    :param enumerate_timeout: each plugin's enumerate deadline on the nodes.
    :param isolated: run each node's plugins in child processes (the default: Ray's worker
        outlives the task, so no driver is loaded into it).
    :raises RayMissing: Ray is not installed.
    :raises GpuscoutError: the cluster cannot be reached.
    """
    start = time.monotonic()
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout < math.inf  # compared, not converted: 10**400 overflows a float
    ):
        raise GpuscoutError(f"timeout must be a finite number of seconds > 0, got {timeout!r:.60}")
    options = {
        "include_software": include_software,
        "disable": list(disable),
        "plugins": list(plugins) if plugins is not None else None,
        "enumerate_timeout": min(enumerate_timeout, timeout),
        "isolated": isolated,
        "timeout": timeout,
    }
    if _attached():
        from gpuscout.cluster._ray_driver import gather

        found = gather(address, start + timeout, options)
    else:
        found = _gather_in_child(address, timeout, options)
    nodes = tuple(read_answer(base, text, base.elapsed) if text is not None else base for base, text in found)
    return Inventory(nodes=nodes, summary=summarize(nodes), elapsed=time.monotonic() - start)


def _attached() -> bool:
    """Whether this process is a Ray driver already (asked without importing Ray)."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(getattr(ray, "is_initialized", lambda: False)())


def _ray_installed() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # a broken or blocked install
        return False


def _gather_in_child(address: str | None, timeout: float, options: Mapping[str, Any]) -> list[Gathered]:
    """``gather`` in a child process of its own. Attaching makes a process a Ray driver, and
    Ray ends a driver whose cluster head stays unreachable (``gcs_rpc_server_reconnect_timeout_s``,
    60 s by default) with exit status 1; that must never be the host. The child dies with the
    host, and a child that dies or overruns is one GpuscoutError."""
    if not _ray_installed():
        raise RayMissing(INSTALL_HINT)
    target = resolve_address(address)
    check_reachable(target, min(CONNECT_TIMEOUT, timeout))
    env = dict(os.environ)
    split = _split(target)
    if split and _is_loopback(split[0]):
        env.setdefault(RAY_LOOPBACK_ENV, "0")
    request = json.dumps(
        {"address": target, "timeout": timeout, "options": dict(options), "parent": os.getpid()}
    ).encode()
    try:
        child = children.start(
            child_argv(_BOOT), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except (OSError, ValueError) as exc:
        raise GpuscoutError(f"cannot start the Ray inventory's process: {exc}") from None
    out, err = Bounded(MAX_ANSWER), Tail()
    limit = timeout + CANCEL_GRACE + CHILD_ALLOWANCE
    try:
        try:
            children.communicate(child, request, time.monotonic() + limit, out.add, err)
        except TimeoutError:
            raise GpuscoutError(f"the Ray inventory did not end within {limit:g} s") from None
    finally:
        kill_group(child)
    if out.over:
        raise GpuscoutError(f"the Ray inventory's process answered over {MAX_ANSWER} bytes")
    try:
        document = json.loads(out.data)
    except (ValueError, RecursionError):
        raise GpuscoutError(
            f"the Ray inventory's process {exit_text(child.returncode or 0)} without an answer"
            f"{ours(last_words(err.bytes()))}"
        ) from None
    if isinstance(document, dict) and "error" in document:
        cls = RayMissing if document.get("kind") == "ray_missing" else GpuscoutError
        raise cls(ours(str(document["error"])))
    try:
        return [_node_of(item) for item in document["nodes"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise GpuscoutError(
            f"the Ray inventory's process answered something unreadable: {type(exc).__name__}: {exc}"
        ) from None


def _node_of(item: Mapping[str, Any]) -> Gathered:
    node = NodeResult(
        node_id=str(item["node_id"]),
        hostname=str(item["hostname"]),
        address=str(item["address"]),
        status=NodeStatus(item["status"]),
        reason=str(item["reason"]),
        ray_resources={str(k): float(v) for k, v in item["ray_resources"].items()},
        accelerator_type=str(item["accelerator_type"]),
        elapsed=float(item["elapsed"]),
    )
    answer = item.get("answer")
    return node, answer if isinstance(answer, str) else None


__all__ = [
    "CHILD_ALLOWANCE",
    "DEFAULT_PORT",
    "INSTALL_HINT",
    "MAX_ANSWER",
    "RAY_LOOPBACK_ENV",
    "RayMissing",
    "import_ray",
    "inventory",
    "ray_address_file",
    "read_answer",
    "resolve_address",
]
