"""Every node of a Ray cluster, as gpuscout finds it there (``pip install 'gpuscout[ray]'``).

``inventory()`` runs one discovery on each alive node as a Ray task that asks for no CPU and no
GPU (so it never waits behind real work) and is pinned to its node
(``NodeAffinitySchedulingStrategy(node_id, soft=False)``: it runs there or not at all). The task
carries no gpuscout code: a few lines sent by value import ``gpuscout.cluster.node`` from the
gpuscout installed on the node, so a node without it answers "missing" instead of failing to
unpickle. Answers are JSON, read back with the wire format's checks.

A node that Ray lists as dead, that dies while its task runs, that does not answer in time or
that lacks gpuscout is reported with the reason; the others still count. Every task still
running at the deadline is cancelled (its worker killed) before the call returns, and an
interrupt cancels them too.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from gpuscout.cluster.inventory import Inventory, NodeResult, NodeStatus, summarize
from gpuscout.errors import GpuscoutError

#: What to install when Ray is missing (the CLI prints it as its one line).
INSTALL_HINT = "the cluster inventory needs Ray: pip install 'gpuscout[ray]'"
#: Ray's variable that, set to 0, keeps a local cluster (and a driver) on 127.0.0.1.
RAY_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: Ray's default GCS port, for an address given without one.
DEFAULT_PORT = 6379
#: Seconds to wait for the cluster's address to accept a connection before ray.init, which
#: otherwise retries an unreachable address for minutes.
CONNECT_TIMEOUT = 5.0
#: Seconds given to cancelled tasks to end (their workers killed) before the call returns.
CANCEL_GRACE = 10.0
#: The largest answer read from one node.
MAX_ANSWER = 16 << 20
#: The node label Ray keeps the accelerator type under (from device 0 of the node).
RAY_TYPE_LABEL = "ray.io/accelerator-type"
RAY_TYPE_RESOURCE = "accelerator_type:"


class RayMissing(GpuscoutError):
    """Ray is not installed here (``INSTALL_HINT`` says how to install it)."""


def _split(address: str) -> tuple[str, int] | None:
    """``address`` (``host:port``, ``[v6]:port`` or ``host``) as host and port; None for the
    forms Ray resolves itself (``auto``, ``ray://...``)."""
    if not address or address == "auto" or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif not sep or ":" in host:  # no port, or a bare IPv6 address
        host, port = address, ""
    try:
        number = int(port) if port else DEFAULT_PORT
    except ValueError:
        raise GpuscoutError(f"not a Ray address (host:port): {address!r}") from None
    if not host or not 0 < number < 65536:
        raise GpuscoutError(f"not a Ray address (host:port): {address!r}")
    return host, number


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def ray_address_file() -> str:
    """Where Ray records the address of the cluster started on this machine
    (``$RAY_TMPDIR``, else ``$TMPDIR`` on Linux, else /tmp; then ``ray/ray_current_cluster``)."""
    base = os.environ.get("RAY_TMPDIR") or (
        os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None) or "/tmp"
    return os.path.join(base, "ray", "ray_current_cluster")


def resolve_address(address: str | None) -> str:
    """The address an inventory connects to: ``address``, else ``RAY_ADDRESS``, else the
    cluster started on this machine (Ray's address file), else ``auto`` (Ray looks itself).
    Read here, not left to Ray, so that a loopback address is seen before Ray is imported."""
    if address:
        return address
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    try:
        with open(ray_address_file(), encoding="utf-8", errors="replace") as f:
            recorded = f.read(1024).strip()
    except OSError:
        recorded = ""
    return recorded or "auto"


def import_ray(address: str | None = None) -> Any:
    """Import Ray, or raise ``RayMissing``. For a loopback ``address`` (a cluster on this machine
    bound to 127.0.0.1) Ray is first told not to swap 127.0.0.1 for the machine's outside
    address, which it otherwise does and then cannot find the cluster; a value the caller set
    is kept, and an already imported Ray is used as it is."""
    split = _split(resolve_address(address))
    if split and _is_loopback(split[0]) and "ray" not in sys.modules:
        os.environ.setdefault(RAY_LOOPBACK_ENV, "0")
    try:
        import ray
    except ImportError:
        raise RayMissing(INSTALL_HINT) from None
    return ray


def _check_reachable(address: str, timeout: float) -> None:
    split = _split(address)
    if split is None:
        return
    host, port = split
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise GpuscoutError(f"cannot reach the Ray cluster at {address}: {why}") from None


def _connect(ray: Any, address: str | None, timeout: float) -> bool:
    """Attach to the cluster unless this process already is; whether this call attached."""
    if ray.is_initialized():
        return False
    target = resolve_address(address)
    _check_reachable(target, timeout)
    try:
        ray.init(address=target, log_to_driver=False, logging_level=logging.WARNING)
    except Exception as exc:  # Ray raises many kinds here (ConnectionError, ImportError for ray://)
        raise GpuscoutError(f"cannot connect to the Ray cluster at {target}: "
                            f"{_first_line(exc)}") from None
    return True


def _node_task() -> Callable[[Mapping[str, Any]], str]:
    """The function each node runs. Defined inside this function so that Ray's pickler sends it
    by value: it only imports, so the node needs the gpuscout installed there, not this one."""

    def gpuscout_inventory_node(options: Mapping[str, Any]) -> str:
        import json
        import os
        import socket
        import sys

        import ray

        node_id = ray.get_runtime_context().get_node_id()
        who = {"format": 1, "node_id": node_id, "hostname": socket.gethostname(),
               "pid": os.getpid(), "python": sys.executable}
        try:
            from gpuscout.cluster.node import report
        except ImportError as exc:
            return json.dumps({**who, "missing": f"{type(exc).__name__}: {exc}"})
        try:
            return report(options, node_id)
        except Exception as exc:  # a broken gpuscout on the node: say so, do not crash Ray's worker
            return json.dumps({**who, "error": f"{type(exc).__name__}: {exc}"})

    return gpuscout_inventory_node


def _ray_view(node: Mapping[str, Any]) -> tuple[dict[str, float], str]:
    resources = {str(k): float(v) for k, v in (node.get("Resources") or {}).items()
                 if isinstance(v, (int, float))}
    kind = str((node.get("Labels") or {}).get(RAY_TYPE_LABEL, "") or "")
    if not kind:
        kind = next((k.removeprefix(RAY_TYPE_RESOURCE) for k in sorted(resources)
                     if k.startswith(RAY_TYPE_RESOURCE)), "")
    return resources, kind


def _base(node: Mapping[str, Any]) -> NodeResult:
    resources, kind = _ray_view(node)
    return NodeResult(node_id=str(node.get("NodeID", "")),
                      hostname=str(node.get("NodeManagerHostname", "")),
                      address=str(node.get("NodeManagerAddress", "")),
                      ray_resources=resources, accelerator_type=kind)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return f"{type(exc).__name__}: {line.strip()}"
    return type(exc).__name__


def read_answer(base: NodeResult, text: Any, elapsed: float) -> NodeResult:
    """``base`` completed with a node's JSON answer ``text``; an answer that is unreadable, from
    another node or in an unknown format makes the node ``failed`` with what was wrong."""
    from gpuscout.results import Discovery
    from gpuscout.wire import structure

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
    base = attrs.evolve(base, ran_on=ran_on, pid=pid if isinstance(pid, int) else 0,
                        hostname=base.hostname or str(doc.get("hostname") or ""))
    if "missing" in doc:
        return failed(
            f"gpuscout with cluster support is not importable by {doc.get('python', 'Python')} "
            f"on this node ({doc['missing']}); install gpuscout there", NodeStatus.MISSING)
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
    return attrs.evolve(base, status=NodeStatus.OK, discovery=found, elapsed=elapsed,
                        version=str(doc.get("version", "")), notes=notes, visible_env=visible)


def _alive(ray: Any) -> set[str]:
    try:
        return {str(n.get("NodeID")) for n in ray.nodes() if n.get("Alive")}
    except Exception:  # the cluster itself is going away: count nobody as alive
        return set()


#: Ray's errors that mean the node itself went away (looked up by name: not every Ray has each).
_NODE_GONE = ("NodeDiedError", "TaskUnschedulableError")


def _collect(ray: Any, ref: Any, base: NodeResult, elapsed: float) -> NodeResult:
    try:
        text = ray.get(ref, timeout=0)
    except ray.exceptions.RayError as exc:
        # Ray may raise before its control store has marked the node dead.
        died = tuple(getattr(ray.exceptions, name) for name in _NODE_GONE
                     if isinstance(getattr(ray.exceptions, name, None), type))
        if isinstance(exc, died) or base.node_id not in _alive(ray):
            return attrs.evolve(base, status=NodeStatus.DEAD, elapsed=elapsed,
                                reason=f"the node died during discovery ({_first_line(exc)})")
        return attrs.evolve(base, status=NodeStatus.FAILED, elapsed=elapsed,
                            reason=f"the task failed: {_first_line(exc)}")
    return read_answer(base, text, elapsed)


def inventory(address: str | None = None, timeout: float = 60.0, *,
              include_software: bool = False, plugins: Sequence[str] | None = None,
              disable: Sequence[str] = (), enumerate_timeout: float = 5.0,
              isolated: bool = True) -> Inventory:
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
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
            math.isfinite(timeout) and timeout > 0):
        raise GpuscoutError(f"timeout must be a finite number of seconds > 0, got {timeout!r:.60}")
    ray = import_ray(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    attached = _connect(ray, address, min(CONNECT_TIMEOUT, timeout))
    pending: dict[Any, tuple[NodeResult, float]] = {}
    try:
        results: dict[str, NodeResult] = {}
        nodes = sorted(ray.nodes(), key=lambda n: str(n.get("NodeID", "")))
        task = ray.remote(_node_task())
        options = {"include_software": include_software, "disable": list(disable),
                   "plugins": list(plugins) if plugins is not None else None,
                   "enumerate_timeout": min(enumerate_timeout, timeout), "isolated": isolated}
        for node in nodes:
            base = _base(node)
            if not node.get("Alive"):
                reason = str(node.get("DeathReasonMessage") or "") or "Ray lists this node as dead"
                results[base.node_id] = attrs.evolve(base, status=NodeStatus.DEAD, reason=reason)
                continue
            ref = task.options(
                num_cpus=0, num_gpus=0, memory=0, max_retries=0, name="gpuscout-inventory",
                scheduling_strategy=NodeAffinitySchedulingStrategy(base.node_id, soft=False),
            ).remote(options)
            pending[ref] = (base, time.monotonic())
        deadline = start + timeout
        while pending and (left := deadline - time.monotonic()) > 0:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            for ref in ready:
                base, sent = pending.pop(ref)
                results[base.node_id] = _collect(ray, ref, base, time.monotonic() - sent)
        for base, sent in pending.values():
            results[base.node_id] = attrs.evolve(
                base, status=NodeStatus.TIMEOUT, elapsed=time.monotonic() - sent,
                reason=f"no answer within {timeout:g} s (the task was cancelled)")
    except GpuscoutError:
        raise
    except Exception as exc:  # the cluster went away under us: one clear error, not Ray's trace
        raise GpuscoutError(f"the Ray cluster stopped answering: {_first_line(exc)}") from None
    finally:
        _cancel(ray, list(pending))
        if attached:
            ray.shutdown()
    ordered = tuple(results[str(n.get("NodeID", ""))] for n in nodes)
    return Inventory(nodes=ordered, summary=summarize(ordered), elapsed=time.monotonic() - start)


def _cancel(ray: Any, refs: Sequence[Any]) -> None:
    """Cancel ``refs`` (killing the workers that run them) and wait up to ``CANCEL_GRACE`` for
    each to end, so nothing of this call is left scheduled or running."""
    if not refs:
        return
    for ref in refs:
        try:
            ray.cancel(ref, force=True)
        except Exception:  # already finished, or the cluster is going away
            pass
    try:
        ray.wait(list(refs), num_returns=len(refs), timeout=CANCEL_GRACE)
    except Exception:
        pass


__all__ = ["INSTALL_HINT", "RAY_LOOPBACK_ENV", "RayMissing", "import_ray", "inventory",
           "read_answer"]
