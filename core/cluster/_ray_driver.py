"""The Ray side of a cluster inventory: attach, send one pinned task per alive node, collect the
answers (or why there is none), cancel what is left. It imports Ray; ``gpuscout.cluster.ray``
runs it in a child process of its own unless the caller is already attached to Ray (see there),
and reads the answers.

``child_main`` is that child: it reads its request as JSON on stdin and writes one JSON object
on the stdout it had at start (what anything else prints goes to stderr).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from gpuscout.cluster.inventory import NodeResult, NodeStatus
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
    _check_host(host, address)
    return host, number


def _check_host(host: str, address: str) -> None:
    """GpuscoutError unless ``host`` is an IP address or a host name whose every label is 1 to
    63 characters (what the resolver would otherwise refuse with a UnicodeError)."""
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    try:
        host.encode("idna")
    except UnicodeError:
        raise GpuscoutError(
            f"not a Ray address (host:port): {address!r:.100}: each part of a "
            f"host name between dots must be 1 to 63 characters"
        ) from None


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
    base = (
        os.environ.get("RAY_TMPDIR")
        or (os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None)
        or "/tmp"
    )
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
    """Import Ray, or raise ``RayMissing`` with ``INSTALL_HINT``; a malformed ``address`` is a
    GpuscoutError first. (A loopback address needs ``RAY_LOOPBACK_ENV`` set before Ray is
    imported: ``gpuscout.cluster.ray`` puts it into the environment of the child that imports
    Ray.)"""
    _split(resolve_address(address))
    try:
        import ray
    except ImportError:
        raise RayMissing(INSTALL_HINT) from None
    return ray


def check_reachable(address: str, timeout: float) -> None:
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


# Ray's advice names its own ``ray start`` flag; gpuscout's option for it is ``--ray``.
_RAY_ADVICE = re.compile(
    r"by setting (?:the )?`--address`\s+flag or `RAY_ADDRESS` environment "
    r"variable"
)
_RAY_FLAG = re.compile(r"(?:the )?`--address`\s+flag")


def ours(text: str) -> str:
    """Ray's message ``text`` with its advice to set the ``--address`` flag given as gpuscout's
    own option (``--ray ADDRESS``)."""
    text = _RAY_ADVICE.sub("with gpuscout's --ray ADDRESS or RAY_ADDRESS", text)
    return _RAY_FLAG.sub("--ray ADDRESS", text)


def first_line(exc: BaseException) -> str:
    """``Type: first non-empty line`` of ``exc``, in gpuscout's words (``ours``)."""
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return ours(f"{type(exc).__name__}: {line.strip()}")
    return type(exc).__name__


#: A node that answered: its record so far (status ok) and the JSON text of its answer.
Gathered = tuple[NodeResult, "str | None"]


def _connect(ray: Any, address: str | None, timeout: float) -> bool:
    """Attach to the cluster unless this process already is; whether this call attached."""
    if ray.is_initialized():
        return False
    target = resolve_address(address)
    check_reachable(target, timeout)
    try:
        ray.init(address=target, log_to_driver=False, logging_level=logging.WARNING)
    except Exception as exc:  # Ray raises many kinds here (ConnectionError, ImportError for ray://)
        raise GpuscoutError(f"cannot connect to the Ray cluster at {target}: {first_line(exc)}") from None
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
        who = {
            "format": 1,
            "node_id": node_id,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "python": sys.executable,
        }
        try:
            from gpuscout.cluster._node import report
        except ImportError as exc:
            return json.dumps({**who, "missing": f"{type(exc).__name__}: {exc}"})
        try:
            return report(options, node_id)
        except Exception as exc:  # a broken gpuscout on the node: say so, do not crash Ray's worker
            return json.dumps({**who, "error": f"{type(exc).__name__}: {exc}"})

    return gpuscout_inventory_node


def _ray_view(node: Mapping[str, Any]) -> tuple[dict[str, float], str]:
    resources = {
        str(k): float(v) for k, v in (node.get("Resources") or {}).items() if isinstance(v, (int, float))
    }
    kind = str((node.get("Labels") or {}).get(RAY_TYPE_LABEL, "") or "")
    if not kind:
        kind = next(
            (k.removeprefix(RAY_TYPE_RESOURCE) for k in sorted(resources) if k.startswith(RAY_TYPE_RESOURCE)),
            "",
        )
    return resources, kind


def _base(node: Mapping[str, Any]) -> NodeResult:
    resources, kind = _ray_view(node)
    return NodeResult(
        node_id=str(node.get("NodeID", "")),
        hostname=str(node.get("NodeManagerHostname", "")),
        address=str(node.get("NodeManagerAddress", "")),
        ray_resources=resources,
        accelerator_type=kind,
    )


def _alive(ray: Any) -> set[str]:
    try:
        return {str(n.get("NodeID")) for n in ray.nodes() if n.get("Alive")}
    except Exception:  # the cluster itself is going away: count nobody as alive
        return set()


#: Ray's errors that mean the node itself went away (looked up by name: not every Ray has each).
_NODE_GONE = ("NodeDiedError", "TaskUnschedulableError")


def _collect(ray: Any, ref: Any, base: NodeResult, elapsed: float) -> Gathered:
    try:
        text = ray.get(ref, timeout=0)
    except ray.exceptions.RayError as exc:
        # Ray may raise before its control store has marked the node dead.
        died = tuple(
            getattr(ray.exceptions, name)
            for name in _NODE_GONE
            if isinstance(getattr(ray.exceptions, name, None), type)
        )
        if isinstance(exc, died) or base.node_id not in _alive(ray):
            return attrs.evolve(
                base,
                status=NodeStatus.DEAD,
                elapsed=elapsed,
                reason=f"the node died during discovery ({first_line(exc)})",
            ), None
        return attrs.evolve(
            base, status=NodeStatus.FAILED, elapsed=elapsed, reason=f"the task failed: {first_line(exc)}"
        ), None
    if not isinstance(text, str):
        return attrs.evolve(
            base, status=NodeStatus.FAILED, elapsed=elapsed, reason="unreadable answer: not JSON text"
        ), None
    return attrs.evolve(base, elapsed=elapsed), text


def gather(address: str | None, deadline: float, options: Mapping[str, Any]) -> list[Gathered]:
    """Every node Ray lists, in node id order: dead ones as Ray says, the others with the answer
    of the task pinned to them by ``deadline`` (``time.monotonic()``), or why there is none.
    Attaches to the cluster unless this process already is, and detaches again."""
    ray = import_ray(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    attached = _connect(ray, address, max(0.1, min(CONNECT_TIMEOUT, deadline - time.monotonic())))
    pending: dict[Any, tuple[NodeResult, float]] = {}
    try:
        results: dict[str, Gathered] = {}
        nodes = sorted(ray.nodes(), key=lambda n: str(n.get("NodeID", "")))
        task = ray.remote(_node_task())
        for node in nodes:
            base = _base(node)
            if not node.get("Alive"):
                reason = str(node.get("DeathReasonMessage") or "") or "Ray lists this node as dead"
                results[base.node_id] = attrs.evolve(base, status=NodeStatus.DEAD, reason=reason), None
                continue
            ref = task.options(
                num_cpus=0,
                num_gpus=0,
                memory=0,
                max_retries=0,
                name="gpuscout-inventory",
                scheduling_strategy=NodeAffinitySchedulingStrategy(base.node_id, soft=False),
            ).remote(dict(options))
            pending[ref] = (base, time.monotonic())
        while pending and (left := deadline - time.monotonic()) > 0:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            for ref in ready:
                base, sent = pending.pop(ref)
                results[base.node_id] = _collect(ray, ref, base, time.monotonic() - sent)
        for base, sent in pending.values():
            results[base.node_id] = (
                attrs.evolve(
                    base,
                    status=NodeStatus.TIMEOUT,
                    elapsed=time.monotonic() - sent,
                    reason=f"no answer within {options.get('timeout', 0):g} s (the task was cancelled)",
                ),
                None,
            )
    except GpuscoutError:
        raise
    except Exception as exc:  # the cluster went away under us: one clear error, not Ray's trace
        raise GpuscoutError(f"the Ray cluster stopped answering: {first_line(exc)}") from None
    finally:
        _cancel(ray, list(pending))
        if attached:
            ray.shutdown()
    return [results[str(n.get("NodeID", ""))] for n in nodes]


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


def gathered_json(found: Sequence[Gathered]) -> list[dict[str, Any]]:
    """What the child sends: each node's record so far and its answer text."""
    return [
        {
            "node_id": n.node_id,
            "hostname": n.hostname,
            "address": n.address,
            "status": str(n.status),
            "reason": n.reason,
            "ray_resources": dict(n.ray_resources),
            "accelerator_type": n.accelerator_type,
            "elapsed": n.elapsed,
            "answer": text,
        }
        for n, text in found
    ]


def child_main() -> int:
    """The inventory's child: request on stdin, ``{"nodes": [...]}`` or ``{"error", "kind"}``
    on the stdout it had at start."""
    from gpuscout._host.children import die_with_parent

    die_with_parent(signal.SIGKILL)  # the host gone: Ray ends this job's tasks with its driver
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    request = json.loads(sys.stdin.read())
    if request.get("parent") is not None and os.getppid() != request["parent"]:
        return 1
    try:
        found = gather(
            request.get("address"), time.monotonic() + float(request["timeout"]), request["options"]
        )
        out: dict[str, Any] = {"nodes": gathered_json(found)}
    except RayMissing as exc:
        out = {"error": str(exc), "kind": "ray_missing"}
    except GpuscoutError as exc:
        out = {"error": str(exc), "kind": "error"}
    answer.write(json.dumps(out))
    answer.close()
    return 0


__all__ = [
    "CANCEL_GRACE",
    "CONNECT_TIMEOUT",
    "DEFAULT_PORT",
    "INSTALL_HINT",
    "RAY_LOOPBACK_ENV",
    "Gathered",
    "RayMissing",
    "check_reachable",
    "child_main",
    "first_line",
    "gather",
    "gathered_json",
    "import_ray",
    "ray_address_file",
    "resolve_address",
]
