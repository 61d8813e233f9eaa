"""The runner protocol: `gpuscout runner --port 0` announces its port, answers with the host's
token, cuts off slow clients, bounds its threads and dies with its parent; the host refuses
another process's answer and reads a real Ollama runner's reply."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuscout import DeviceInfo
from gpuscout.runner import MAX_PORT_LINE, TOKEN_ENV, RunnerError, discover_in_child, serve
from gpuscout.runner import _client as runner_module
from gpuscout.runner._reply import ReplyHead, parse_whole_reply
from gpuscout.testing import eventually, promptly, running

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to find leftovers")

DATA = Path(__file__).parent / "data"
MARKER = "GPUSCOUT_TEST_CHILD"
TOKEN = "0123456789abcdef0123456789abcdef"
RUNNER = [sys.executable, "-m", "gpuscout", "runner", "--port", "0", "--plugins", "cuda"]
DEVICES = b'[{"id":"0","backend":"CUDA"}]'
GOOD = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(DEVICES), DEVICES)


class Runner:
    """A `gpuscout runner --port 0` started as a shell would start it (stdin at /dev/null)."""

    def __init__(self, env: dict[str, str], *options: str) -> None:
        self.proc = subprocess.Popen(
            [*RUNNER, *options],
            env={**env, TOKEN_ENV: TOKEN},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self.first_line = promptly(self.proc.stdout.readline, 30)
        self.port = int(json.loads(self.first_line)["port"])

    def request(self, raw: bytes) -> tuple[ReplyHead, bytes]:
        """Send ``raw`` and read the reply until the runner closes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=20) as sock:
            sock.sendall(raw)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        return parse_whole_reply(data)

    def get(self, path: str = "/info", method: str = "GET") -> tuple[ReplyHead, bytes]:
        return self.request(f"{method} {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())


@pytest.fixture
def runner(env: dict[str, str]) -> Iterator[Callable[..., Runner]]:
    """``runner(*options)``: a started runner; each is killed and reaped after the test."""
    started: list[Runner] = []

    def start(*options: str) -> Runner:
        started.append(Runner(env, *options))
        return started[-1]

    yield start
    for one in started:
        if one.proc.poll() is None:
            one.proc.kill()
        one.proc.wait(10)
        assert one.proc.stdout is not None
        one.proc.stdout.close()


def test_the_first_stdout_line_names_the_port_it_listens_on(runner: Callable[..., Runner]) -> None:
    """`--port 0` binds a port on 127.0.0.1 and prints {"port": N} first."""
    started = runner()
    assert json.loads(started.first_line) == {"port": started.port} and started.port > 0
    with socket.create_connection(("127.0.0.1", started.port), timeout=5):
        pass


def test_info_answers_the_device_array_with_the_token_header(runner: Callable[..., Runner]) -> None:
    """/info is 200 with a JSON array body and the token from the environment in a header."""
    head, body = runner().get("/info")
    assert head.status == 200 and head.headers["x-gpuscout-token"] == TOKEN
    assert isinstance(json.loads(body), list)


def test_another_path_is_a_404_with_a_json_error(runner: Callable[..., Runner]) -> None:
    """Any path but /info is 404, with a JSON error body and the token."""
    head, body = runner().get("/other")
    assert head.status == 404 and head.headers["x-gpuscout-token"] == TOKEN
    assert "not found" in json.loads(body)["error"]


def test_another_method_is_refused_with_a_json_error(runner: Callable[..., Runner]) -> None:
    """Only GET is served: POST is 501 with a JSON error body."""
    head, body = runner().get("/info", method="POST")
    assert head.status == 501 and "POST" in json.loads(body)["error"]


def test_sigterm_ends_the_runner_with_exit_code_0(runner: Callable[..., Runner]) -> None:
    """SIGTERM is a clean shutdown."""
    started = runner()
    started.proc.send_signal(signal.SIGTERM)
    assert started.proc.wait(5) == 0


SLOW_IMPORT = """
    import os, time
    open(os.environ["SLOW_IMPORT_STARTED"], "w").close()
    time.sleep(float(os.environ.get("SLOW_IMPORT_SECONDS", "30")))
    from gpuscout.plugin import hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        return []
"""


def test_sigterm_while_plugins_load_also_ends_the_runner_with_0(
    env: dict[str, str], site_factory: Callable[..., Path], tmp_path: Path
) -> None:
    """Loading plugins may take seconds (a driver library that imports slowly); SIGTERM then is
    the same clean shutdown as once the runner serves, not a death by signal."""
    site = site_factory(
        "gpuscout-slow-import", "1.0", {"slow_import": SLOW_IMPORT}, {"slowimport": "slow_import"}
    )
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuscout", "runner", "--port", "0", "--plugins", "slowimport"],
        env={**env, "PYTHONPATH": str(site), "SLOW_IMPORT_STARTED": str(started), TOKEN_ENV: TOKEN},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    try:
        assert eventually(started.exists, within=30), "the plugin never started importing"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        assert proc.stdout is not None
        proc.stdout.close()


def test_stdin_at_dev_null_does_not_end_the_runner(runner: Callable[..., Runner]) -> None:
    """A runner started with stdin at /dev/null (a shell's `&`) keeps serving."""
    started = runner()
    time.sleep(0.5)
    assert started.proc.poll() is None and started.get()[0].status == 200


def test_an_idle_runner_exits_by_itself(runner: Callable[..., Runner]) -> None:
    """With no connection for --idle-exit seconds the runner exits 0."""
    started = runner("--idle-exit", "0.3")
    assert started.proc.wait(5) == 0


INTERMEDIATE = f"""
import subprocess, sys, time
child = subprocess.Popen({RUNNER!r}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
line = child.stdout.readline()
print(child.pid, flush=True)
time.sleep(300)
"""


def test_a_runner_whose_parent_is_killed_exits(env: dict[str, str]) -> None:
    """SIGKILL of the runner's parent ends the runner within a few seconds."""
    parent = subprocess.Popen(
        [sys.executable, "-c", INTERMEDIATE], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    assert parent.stdout is not None
    with parent.stdout:
        runner_pid = int(promptly(parent.stdout.readline, 30))
        assert running(runner_pid)
        parent.kill()
        parent.wait(5)
    assert eventually(lambda: not running(runner_pid)), f"runner {runner_pid} outlived its parent"


TOKEN_PLUGIN = """
    from gpuscout import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        seen = context.env.get("GPUSCOUT_RUNNER_TOKEN", "absent")
        return [DeviceInfo(id="0", library="CUDA", description=seen, total_memory=1)]
"""


def test_the_plugins_do_not_see_the_token(env: dict[str, str], site_factory: Callable[..., Path]) -> None:
    """The token is for the reply header: the runner's plugins find no GPUSCOUT_RUNNER_TOKEN."""
    site = site_factory("gpuscout-tokenpeek", "1.0", {"tokenpeek": TOKEN_PLUGIN}, {"tokenpeek": "tokenpeek"})
    child_env = {**env, "PYTHONPATH": str(site), "GPUSCOUT_PLUGINS": "tokenpeek"}
    assert [d.description for d in discover_in_child(child_env, timeout=30)] == ["absent"]


def test_a_half_sent_request_is_cut_off_while_others_are_answered(runner: Callable[..., Runner]) -> None:
    """A client that stops mid-request is disconnected after the read timeout; /info still
    answers in the meantime."""
    started = runner("--read-timeout", "1")
    with socket.create_connection(("127.0.0.1", started.port), timeout=10) as slow:
        slow.sendall(b"GET /info HTTP/1.0\r\nHost: x\r\n")  # no blank line: never complete
        begin = time.monotonic()
        assert started.get()[0].status == 200
        assert time.monotonic() - begin < 1
        assert slow.recv(65536) == b""
        assert 0.5 < time.monotonic() - begin < 5


def test_silent_connections_do_not_take_the_handlers(runner: Callable[..., Runner]) -> None:
    """With 8 connections held open without a word, a ninth is answered 200 at once: a request
    takes a handler only once its head is in (503 when all are busy: test_runner_slow_clients)."""
    started = runner("--read-timeout", "10")
    held = [socket.create_connection(("127.0.0.1", started.port), timeout=10) for _ in range(8)]
    try:
        time.sleep(0.3)  # every one accepted
        begin = time.monotonic()
        head, _body = started.get()
        assert head.status == 200 and head.headers["x-gpuscout-token"] == TOKEN
        assert time.monotonic() - begin < 2
    finally:
        for sock in held:
            sock.close()


def test_a_failing_discovery_answers_500_with_the_error() -> None:
    """When discovery raises, /info is 500 with {"error": ...}."""
    ports: list[int] = []

    def broken() -> list[DeviceInfo]:
        raise RuntimeError("driver exploded")

    server = threading.Thread(
        target=serve, args=(broken, 0, 1.0), kwargs={"announce": ports.append}, daemon=True
    )
    server.start()
    assert eventually(lambda: bool(ports))
    with socket.create_connection(("127.0.0.1", ports[0]), timeout=10) as sock:
        sock.sendall(b"GET /info HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, body = parse_whole_reply(data)
    assert head.status == 500 and json.loads(body) == {"error": "driver exploded"}
    server.join(10)


# -- the host side -------------------------------------------------------------------------------


def announcing(script: str) -> list[str]:
    """A stand-in for the default runner command: a Python child running ``script``."""
    return [sys.executable, "-c", textwrap.dedent(script)]


@pytest.fixture
def impostor() -> Iterator[Callable[[bytes], int]]:
    """``impostor(reply)``: a server in this process that answers ``reply`` to every
    connection; returns its port."""
    servers: list[socket.socket] = []

    def start(reply: bytes) -> int:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        servers.append(srv)

        def serve_all() -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(65536)
                    conn.sendall(reply)

        threading.Thread(target=serve_all, daemon=True).start()
        return int(srv.getsockname()[1])

    yield start
    for srv in servers:
        srv.close()


def test_the_host_refuses_an_answer_without_its_token(
    env: dict[str, str], impostor: Callable[[bytes], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When another process answers on the announced port, the missing token gives it away."""
    port = impostor(GOOD)
    monkeypatch.setattr(
        runner_module,
        "default_command",
        lambda: announcing(f"import time; print('{{\"port\": {port}}}', flush=True); time.sleep(300)"),
    )
    with pytest.raises(
        RunnerError,
        match=f"answer on port {port} did not carry this child's "
        r"token \(no X-Gpuscout-Token header\): another process answered",
    ):
        discover_in_child(env, timeout=10)


WRONG_TOKEN_RUNNER = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("X-Gpuscout-Token", "not-yours")
        self.end_headers()
        self.wfile.write(b'[{"id":"0","backend":"CUDA"}]')
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_a_custom_runner_with_another_token_is_refused(env: dict[str, str]) -> None:
    """A custom command may omit the header, but a wrong token is another process's answer."""
    with pytest.raises(RunnerError, match=r"did not carry this child's token \(another "):
        discover_in_child(env, timeout=10, command=[sys.executable, "-c", WRONG_TOKEN_RUNNER, "{port}"])


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            "print('listening on 8080', flush=True)",
            r"first stdout line is not \{\"port\": N\} with N in 1-65535: b'listening on 8080'",
        ),
        ("print('{\"port\": 70000}', flush=True)", r"not \{\"port\": N\} with N in 1-65535"),
        (
            "import os, time; os.close(1); time.sleep(300)",
            r"runner closed its stdout before announcing its port; it printed b''",
        ),
        (
            "import sys; sys.stdout.write('half'); sys.exit(3)",
            r"runner exited with status 3 before announcing its port; it printed b'half'",
        ),
        (
            "import sys, time; sys.stdout.write('x' * 10000); sys.stdout.flush(); time.sleep(300)",
            f"first stdout line is longer than {MAX_PORT_LINE} bytes",
        ),
        (
            "import time; time.sleep(300)",
            r"before timeout \(1 s\); last attempt: no port announced on stdout",
        ),
    ],
    ids=["garbage", "bad-port", "closed-stdout", "crash", "endless-line", "silence"],
)
def test_a_runner_that_does_not_announce_a_port_is_an_error(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, script: str, message: str
) -> None:
    """Anything but a {"port": N} first line is a RunnerError that quotes what was printed."""
    monkeypatch.setattr(runner_module, "default_command", lambda: announcing(script))
    start = time.monotonic()
    with pytest.raises(RunnerError, match=message):
        discover_in_child(env, timeout=1)
    assert time.monotonic() - start < 4


OLLAMA_RUNNER = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
body = open(sys.argv[2], "rb").read()
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200 if self.path == "/info" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_a_real_ollama_runner_reply_reads_as_device_records(env: dict[str, str]) -> None:
    """A recorded /info array of Ollama's runner, served by another runner (no token header),
    becomes DeviceInfo records."""
    command = [sys.executable, "-c", OLLAMA_RUNNER, "{port}", str(DATA / "ollama_info.json")]
    devices = discover_in_child(env, timeout=10, command=command)
    assert [(d.library, d.description, d.pci_id, d.compute, d.free_memory) for d in devices] == [
        ("CUDA", "NVIDIA GeForce RTX 4090", "0000:01:00.0", "8.9", 24998051840),
        ("ROCm", "AMD Radeon RX 7900 XTX", "0000:03:00.0", "gfxb00", 25483542528),
        ("Vulkan", "Intel(R) Graphics (RPL-S)", "0000:00:02.0", "0.0", 16647634944),
    ]
    cuda, rocm, vulkan = devices
    assert cuda.id == "GPU-5b2b7b5e-8a4c-2e0f-9d1c-6f3a4b2c1d0e" and cuda.name == "CUDA0"
    assert cuda.library_path == ("/usr/lib/ollama", "/usr/lib/ollama/cuda_v12")
    assert (cuda.driver_major, cuda.driver_minor, cuda.integrated) == (12, 8, False)
    assert (rocm.filter_id, rocm.gfx_target) == ("0", "gfx1100")
    assert vulkan.integrated and vulkan.library_path == ()


def test_a_runner_that_dies_is_reported_with_its_last_stderr_line(tmp_path: Path) -> None:
    """The crash names the child's last words, however much it printed before them."""
    script = tmp_path / "dying_runner.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        for _ in range(200):
            sys.stderr.write("noise " * 2000 + "\\n")
        sys.stderr.write("driver: GPU fell off the bus\\n")
        sys.exit(3)
    """)
    )
    with pytest.raises(RunnerError) as caught:
        discover_in_child(
            {"PATH": os.environ.get("PATH", "")}, timeout=20, command=[sys.executable, str(script), "{port}"]
        )
    message = str(caught.value)
    assert "exited with status 3" in message
    assert message.endswith("; last stderr: driver: GPU fell off the bus")
