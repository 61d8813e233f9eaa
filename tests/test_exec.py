"""`gpuscout exec`: a real child gets the selection's environment, no shell, inherited stdio,
forwarded signals and its exit status passed through."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout._selection import execute
from gpuscout.cli import main
from gpuscout.testing import CliRunner

CUDA_A = DeviceInfo(
    id="GPU-aaaa1111",
    library="CUDA",
    filter_id="GPU-aaaa1111",
    uuid="GPU-aaaa1111",
    pci_id="0000:01:00.0",
    free_memory=40 << 30,
)
CUDA_B = DeviceInfo(
    id="GPU-bbbb2222",
    library="CUDA",
    filter_id="GPU-bbbb2222",
    uuid="GPU-bbbb2222",
    pci_id="0000:02:00.0",
    free_memory=30 << 30,
)
ROCM_A = DeviceInfo(
    id="GPU-5f3c0a1b",
    library="ROCm",
    filter_id="GPU-5f3c0a1b",
    uuid="GPU-5f3c0a1b",
    pci_id="0000:c4:00.0",
    free_memory=60 << 30,
)
VARIABLES = [
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GGML_VK_VISIBLE_DEVICES",
    "KEEP_ME",
]
# Prints the visibility variables it was started with (absent ones as null), as one JSON object.
PRINT_ENV = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {VARIABLES!r}}}))"
# No plugin at all: exec selects `all` of nothing, so the child gets the environment unchanged.
NO_PLUGINS = ["--disable", "cuda,rocm,metal,vulkan"]


def child_env(
    cli: CliRunner, devices: list[DeviceInfo], *args: str, env: dict[str, str] | None = None
) -> dict[str, str | None]:
    """The visibility variables `exec ARGS -- CHILD` hands its child over ``devices``."""
    run = cli(["exec", *args, "--", sys.executable, "-c", PRINT_ENV], devices, env=env)
    assert run.code == 0, run.err
    shown: dict[str, str | None] = run.json()
    return shown


def gpuscout_exec(*args: str, stdout: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuscout", "exec", *NO_PLUGINS, *args], text=True, stdout=stdout
    )


def test_exec_adds_the_selection_environment(gpuscout_cli: CliRunner) -> None:
    """The child sees CUDA_VISIBLE_DEVICES naming the selected device, and nothing else set."""
    assert child_env(gpuscout_cli, [CUDA_A, CUDA_B], "--device", "cuda:1") == {
        "CUDA_VISIBLE_DEVICES": "GPU-bbbb2222",
        "ROCR_VISIBLE_DEVICES": None,
        "HIP_VISIBLE_DEVICES": None,
        "GGML_VK_VISIBLE_DEVICES": None,
        "KEEP_ME": None,
    }


def test_exec_keeps_the_rest_of_the_environment(gpuscout_cli: CliRunner) -> None:
    """Variables gpuscout was started with reach the child; selection variables replace theirs."""
    shown = child_env(
        gpuscout_cli,
        [CUDA_A, CUDA_B],
        "--device",
        "GPU-aaaa",
        env={"KEEP_ME": "yes", "CUDA_VISIBLE_DEVICES": "0,1"},
    )
    assert shown["KEEP_ME"] == "yes"
    assert shown["CUDA_VISIBLE_DEVICES"] == "GPU-aaaa1111"


def test_exec_without_device_selects_all(gpuscout_cli: CliRunner) -> None:
    """Without --device every device is selected."""
    shown = child_env(gpuscout_cli, [CUDA_A, CUDA_B])
    assert shown["CUDA_VISIBLE_DEVICES"] == "GPU-aaaa1111,GPU-bbbb2222"


def test_exec_devices_union(gpuscout_cli: CliRunner) -> None:
    """Several --device options union, in rank order."""
    shown = child_env(
        gpuscout_cli, [CUDA_A, CUDA_B, ROCM_A], "--device", "library=rocm", "--device", "cuda:1"
    )
    assert shown["ROCR_VISIBLE_DEVICES"] == "GPU-5f3c0a1b"
    assert shown["CUDA_VISIBLE_DEVICES"] is None  # mixed selection: the seed leaves CUDA alone


def test_exec_isolate_hides_the_other_vendors(gpuscout_cli: CliRunner) -> None:
    """With --isolate the child gets the hide-all values of every unselected vendor."""
    assert child_env(gpuscout_cli, [CUDA_A, ROCM_A], "--isolate", "--device", "library=rocm") == {
        "CUDA_VISIBLE_DEVICES": "",
        "ROCR_VISIBLE_DEVICES": "GPU-5f3c0a1b",
        "HIP_VISIBLE_DEVICES": None,
        "GGML_VK_VISIBLE_DEVICES": "",
        "KEEP_ME": None,
    }


def test_exec_runs_without_a_shell(gpuscout_cli: CliRunner) -> None:
    """Arguments reach the child verbatim: no expansion, no word splitting."""
    args = ["$HOME", "a b", "*", "x;y"]
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    run = gpuscout_cli(["exec", "--", sys.executable, "-c", code, *args])
    assert (run.code, run.json()) == (0, args)


def test_empty_command_exits_2_before_discovery(capsys: pytest.CaptureFixture[str]) -> None:
    """`exec --` with no command is one error line and exit 2; nothing is discovered or run."""

    def no_discovery(args: object) -> Scout:
        raise AssertionError("discovery must not start")

    assert main(["exec", "--device", "best", "--"], scout_factory=no_discovery) == 2
    err = capsys.readouterr().err
    assert err == ("gpuscout: error: exec needs a command after '--', e.g. gpuscout exec -- python app.py\n")


@pytest.mark.parametrize(("device", "code"), [("nope", 2), ("fits:12", 2), ("cuda:5", 1)])
def test_bad_selector_exits_2_and_starts_nothing(
    gpuscout_cli: CliRunner, tmp_path: Path, device: str, code: int
) -> None:
    """A malformed --device is exit 2, one matching nothing exit 1, each with one line, and the
    command never runs."""
    marker = tmp_path / "ran"
    script = f"open({str(marker)!r}, 'w').close()"
    command = ["exec", "--device", device, "--", sys.executable, "-c", script]
    run = gpuscout_cli(command, [CUDA_A])
    assert run.code == code, run.err
    assert run.err.count("\n") == 1
    assert not marker.exists()


def test_a_missing_command_exits_127(gpuscout_cli: CliRunner) -> None:
    """A command that is not on PATH is exit 127 with one line, as a shell reports it."""
    run = gpuscout_cli(["exec", "--", "gpuscout-no-such-command"])
    assert run.code == 127, run.err
    assert "command not found: 'gpuscout-no-such-command'" in run.err


def test_exit_status_is_passed_through() -> None:
    """The child's exit status 5 is gpuscout's exit status."""
    proc = gpuscout_exec("--", sys.executable, "-c", "raise SystemExit(5)")
    assert proc.wait(timeout=60) == 5


def test_a_child_killed_by_sigterm_gives_143() -> None:
    """A child that dies of signal 15 makes gpuscout exit 128 + 15."""
    code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    proc = gpuscout_exec("--", sys.executable, "-c", code)
    assert proc.wait(timeout=60) == 143


def test_stdin_and_stdout_are_inherited() -> None:
    """The child reads gpuscout's stdin and writes to its stdout."""
    code = "print(input().upper())"
    out = subprocess.run(
        [sys.executable, "-m", "gpuscout", "exec", *NO_PLUGINS, "--", sys.executable, "-c", code],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (0, "HELLO\n")


# Exits with 7 on SIGINT, 8 on SIGTERM, 9 on SIGHUP, once its handlers are set ("ready").
HANDLER_CHILD = """
import signal, sys, time
codes = {signal.SIGINT: 7, signal.SIGTERM: 8, signal.SIGHUP: 9}
for s, c in codes.items():
    signal.signal(s, lambda signo, frame: sys.exit(codes[signo]))
print("ready", flush=True)
for _ in range(600):
    time.sleep(0.1)
sys.exit(1)
"""


@pytest.mark.parametrize(("signo", "expected"), [(signal.SIGINT, 7), (signal.SIGTERM, 8), (signal.SIGHUP, 9)])
def test_a_signal_to_gpuscout_is_forwarded_to_the_child(signo: int, expected: int) -> None:
    """SIGINT, SIGTERM and SIGHUP sent to the gpuscout process reach the child."""
    proc = gpuscout_exec("--", sys.executable, "-c", HANDLER_CHILD, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signo)
        assert proc.wait(timeout=30) == expected
    finally:
        proc.kill()
        proc.wait()


# Takes SIGINTs synchronously in three bursts; after the first SIGINT of a burst it waits 0.3 s
# for duplicates, and it exits with 10 + the number of duplicates. The kernel merges a standard
# signal that is still pending, so one burst shows a duplicate only some of the time; three
# bursts make a missed double delivery unlikely.
COUNTING_CHILD = """
import signal, sys, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
print("ready", flush=True)
duplicates = 0
for burst in range(3):
    signal.sigwaitinfo({signal.SIGINT})
    deadline = time.monotonic() + 0.3
    while (left := deadline - time.monotonic()) > 0:
        if signal.sigtimedwait({signal.SIGINT}, left) is not None:
            duplicates += 1
sys.exit(10 + duplicates)
"""


def _read_until(fd: int, text: bytes, timeout: float) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while text not in data and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            data += os.read(fd, 1024)
    return data


def _controlling_terminal() -> None:
    # Runs in the new session's leader: stdin (the pty) becomes its controlling terminal.
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_terminal_ctrl_c_reaches_the_child_exactly_once() -> None:
    """Ctrl-C on a real terminal reaches the child once, not once more forwarded by gpuscout."""
    master, slave = pty.openpty()
    cmd = [sys.executable, "-m", "gpuscout", "exec", *NO_PLUGINS, "--", sys.executable, "-c", COUNTING_CHILD]
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, start_new_session=True, preexec_fn=_controlling_terminal
    )
    os.close(slave)
    try:
        assert b"ready" in _read_until(master, b"ready", 30)
        for _ in range(3):
            os.write(master, b"\x03")
            time.sleep(0.4)
        assert proc.wait(timeout=30) == 10
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def test_portable_runner_passes_the_exit_status_through() -> None:
    """The fallback used where sigtimedwait is missing also passes the status through."""
    code = "raise SystemExit(5)"
    assert execute._run_portable([sys.executable, "-c", code], dict(os.environ)) == 5


@pytest.mark.parametrize(("returncode", "status"), [(0, 0), (5, 5), (-15, 143), (-2, 130)])
def test_exit_code_follows_the_shell_convention(returncode: int, status: int) -> None:
    """A signal death N is reported as 128 + N."""
    assert execute.exit_code(returncode) == status


def test_exec_verify_mismatch_exits_3_and_runs_nothing(
    gpuscout_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the verification child sees no device, the command is not started and exit is 3."""
    from gpuscout._selection import verify

    monkeypatch.setattr(
        verify, "child_command", lambda *a: [sys.executable, "-c", "print('{\"devices\": []}')"]
    )
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').close()"
    run = gpuscout_cli(["exec", "--verify", "--", sys.executable, "-c", code], [CUDA_A])
    assert run.code == 3, run.err
    assert "selected but not seen: S0=CUDA (GPU-aaaa1111" in run.err
    assert not marker.exists()


def test_exec_verify_with_lavapipe_runs_the_command(lavapipe_env: dict[str, str]) -> None:
    """`exec --verify --include-software` on llvmpipe verifies with a real child, then runs."""
    env = lavapipe_env
    code = "import os; print(os.environ['GGML_VK_VISIBLE_DEVICES'])"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuscout",
            "exec",
            "--plugins",
            "vulkan",
            "--include-software",
            "--verify",
            "--device",
            "library=vulkan",
            "--",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if out.returncode == 1 and "no device of library 'vulkan'" in out.stderr:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the Vulkan plugin found no lavapipe device: {out.stderr}")
        pytest.skip("the Vulkan plugin found no lavapipe device")
    assert out.returncode == 0, out.stderr
    assert "verified" in out.stderr
    assert out.stdout.strip().isdigit()


def test_run_from_another_thread_passes_the_exit_status_through() -> None:
    """Outside the main thread (no signal handling possible) the child still runs to its status."""
    import threading

    result: list[int] = []
    worker = threading.Thread(
        target=lambda: result.append(
            execute.run([sys.executable, "-c", "raise SystemExit(6)"], dict(os.environ))
        )
    )
    worker.start()
    worker.join(timeout=60)
    assert result == [6]
