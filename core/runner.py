"""Isolated discovery: a child process serves ``GET /info`` on 127.0.0.1 and the host polls it.

The seed's GetDevicesFromRunner: the host starts the child with the environment it wants the
child to have, polls every 10 ms until a deadline, and tells a crash, a 404 (a runner without
/info), another status and an unparsable reply apart. The child is always reaped. Init validation
runs each device that needs it in such a child, with only that device visible.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from gpuscout.errors import GpuscoutError
from gpuscout.log import get_logger
from gpuscout.merge import Dropped
from gpuscout.records import DeviceInfo

if TYPE_CHECKING:
    from gpuscout.scout import Scout

HOST = "127.0.0.1"
POLL_INTERVAL = 0.010
#: A runner nobody asks anything for this long exits by itself (no orphans).
IDLE_EXIT = 60.0


class RunnerError(GpuscoutError):
    """Isolated discovery failed: crash, 404, error status, or no answer before the deadline."""


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def default_command(port: int) -> list[str]:
    """This Python running ``gpuscout runner`` on ``port``."""
    return [sys.executable, "-m", "gpuscout", "runner", "--port", str(port)]


def _get_info(port: int, timeout: float) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", "/info", headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def poll_runner(port: int, child: subprocess.Popen[bytes], deadline: float) -> list[DeviceInfo]:
    """Poll ``/info`` every 10 ms until an answer, a crash or the deadline (a monotonic time)."""
    from gpuscout.wire import from_json

    log = get_logger()
    while True:
        if time.monotonic() >= deadline:
            raise RunnerError("failed to finish discovery before timeout")
        try:
            status, body = _get_info(port, timeout=max(0.05, deadline - time.monotonic()))
        except OSError:
            code = child.poll()
            if code is not None:
                raise RunnerError(f"runner crashed (exit code {code})") from None
            time.sleep(POLL_INTERVAL)
            continue
        if status == 404:
            raise RunnerError("runner does not report devices (/info answered 404)")
        if status != 200:
            raise RunnerError(f"runner error (status {status}): {body[:200].decode(errors='replace')}")
        try:
            devices: list[DeviceInfo] = from_json(body, list[DeviceInfo])
        except GpuscoutError as exc:
            # The seed keeps polling on an unparsable reply; so do we, until the deadline.
            log.warning("runner.unparsable_reply", error=str(exc))
            time.sleep(POLL_INTERVAL)
            continue
        return devices


def discover_in_child(
    env: Mapping[str, str], timeout: float = 30.0, command: Sequence[str] | None = None
) -> list[DeviceInfo]:
    """Devices as a child process with environment ``env`` sees them.

    ``command`` is the child's argv; ``{port}`` in it is replaced by the chosen port (default:
    ``python -m gpuscout runner --port {port}``). Raises RunnerError; the child is always reaped.
    """
    port = free_port()
    argv = ([part.replace("{port}", str(port)) for part in command] if command
            else default_command(port))
    child = subprocess.Popen(argv, env=dict(env), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return poll_runner(port, child, time.monotonic() + timeout)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def validate_devices(
    scout: Scout, devices: Sequence[DeviceInfo], timeout: float = 30.0
) -> tuple[list[DeviceInfo], list[Dropped]]:
    """Initialise each device that needs it in a child with only that device visible.

    A crash, a timeout or an answer without the device drops it, with the reason.
    """
    kept: list[DeviceInfo] = []
    dropped: list[Dropped] = []
    for device in devices:
        init_env = scout.init_env(device)
        if init_env is None:
            kept.append(device)
            continue
        env = {**scout.env, **scout.visible_env([device]), **init_env}
        try:
            seen = discover_in_child(env, timeout=timeout)
        except RunnerError as exc:
            dropped.append(Dropped(device, f"init validation failed: {exc}"))
            continue
        if not any(_same_device(device, other) for other in seen):
            dropped.append(Dropped(device, "init validation failed: device not seen by the child"))
            continue
        kept.append(device)
    return kept, dropped


def _same_device(a: DeviceInfo, b: DeviceInfo) -> bool:
    if a.library != b.library:
        return False
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    if a.pci_id and b.pci_id:
        return a.pci_id.lower() == b.pci_id.lower()
    return a.id == b.id


def serve(scout: Scout, port: int, include_software: bool = False,
          idle_exit: float = IDLE_EXIT) -> int:
    """Serve ``GET /info`` (the wire DeviceInfo array) on 127.0.0.1:``port`` until idle."""
    from gpuscout.wire import to_json

    last_request = [time.monotonic()]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            last_request[0] = time.monotonic()
            if self.path != "/info":
                self._reply(404, b'{"error":"not found"}')
                return
            try:
                found = scout.discover(include_software=include_software)
                body = to_json(found.devices).encode()
            except Exception as exc:  # the host must hear about it, not a dropped connection
                self._reply(500, json.dumps({"error": str(exc)}).encode())
                return
            self._reply(200, body)

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            get_logger().debug("runner.request", line=format % args)

    server = ThreadingHTTPServer((HOST, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        while time.monotonic() - last_request[0] < idle_exit:
            time.sleep(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


__all__ = ["RunnerError", "discover_in_child", "serve", "validate_devices"]
