"""The runner's HTTP replies: ``GET /info`` (and ``HEAD``) answered with the devices as the wire
format writes them, every error as JSON, the token sent back in ``TOKEN_HEADER``, and the 503
a connection over the limit gets (``gpuscout.runner._server`` serves them)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from gpuscout._records.device import DeviceInfo
from gpuscout.log import get_logger

#: The reply header that carries the token back.
TOKEN_HEADER = "X-Gpuscout-Token"

_log = get_logger("gpuscout.runner._server")


def json_error(text: str) -> bytes:
    return json.dumps({"error": text}).encode()


def handler_class(
    devices: Callable[[], Sequence[DeviceInfo]], token: str | None, read_timeout: float
) -> type[BaseHTTPRequestHandler]:
    from gpuscout._records.encode import to_json

    class Handler(BaseHTTPRequestHandler):
        timeout = read_timeout  # each read and write on the connection
        server: Any  # the runner's HTTPServer, which has read each request head (``heads``)
        head_only = False  # a HEAD request: the reply's headers (Content-Length too), no body

        def setup(self) -> None:
            super().setup()
            # The server has read the request head already: the handler parses it from there.
            self.rfile.close()
            self.rfile = io.BytesIO(self.server.heads.pop(self.connection, b""))

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/info":
                self._reply(404, json_error(f"not found: {self.path[:200]}"))
                return
            try:
                body = to_json(list(devices())).encode()
            except Exception as exc:  # the host must hear about it, not a dropped connection
                self._reply(500, json_error(str(exc)))
                return
            self._reply(200, body)

        def do_HEAD(self) -> None:
            # As GET (a discovery included, so the status says what GET would), headers only:
            # what `curl -I` and health checks send.
            self.head_only = True
            self.do_GET()

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            # Bad request lines, unknown methods (501), over-long lines: JSON like the rest.
            self.close_connection = True
            self._reply(code, json_error(message or self.responses.get(code, ("error",))[0]))

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if token:
                self.send_header(TOKEN_HEADER, token)
            self.end_headers()
            if not self.head_only:
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            _log.debug("runner.request", line=format % args)

    return Handler


def busy_reply(token: str | None, max_connections: int) -> bytes:
    body = json_error(f"busy: {max_connections} connections are being served")
    head = [
        "HTTP/1.0 503 Service Unavailable",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ] + ([f"{TOKEN_HEADER}: {token}"] if token else [])
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
