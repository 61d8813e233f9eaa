"""The command line against hostile input: bad flags, odd plugin names, Ctrl-C, a closed stdout
and an ASCII-only terminal. Each refusal is one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, Scout
from gpuscout.cli import main
from gpuscout.cli._common import plugin_names
from gpuscout.testing import CliRunner
from tests.conftest import with_default_sigint

BUILTINS = "cuda, metal, rocm, vulkan"
# In-process plugins shipped as a real installed distribution, for subprocess tests.
PLUGINS = {
    "gpuscout_test_hang": """
        import time
        from pathlib import Path
        from gpuscout import hookimpl

        @hookimpl
        def gpuscout_enumerate(context):
            Path(context.env["GPUSCOUT_TEST_MARKER"]).write_text("hanging")
            time.sleep(600)
            return []
    """,
    "gpuscout_test_odd": """
        from gpuscout import DeviceInfo, hookimpl

        @hookimpl
        def gpuscout_enumerate(context):
            return [DeviceInfo(id="0", library="Vulkan", name="\\u00dcn\\u00efc\\u00f6d\\u00e9 \\u2713",
                               description="\\u00dcn\\u00efc\\u00f6d\\u00e9 \\u2713 [/beta]",
                               total_memory=8 << 30, free_memory=4 << 30)]
    """,
}


@pytest.fixture(scope="module")
def site(site_factory: Callable[..., Path]) -> Path:
    """A folder holding the distribution with the ``hang`` and ``odd`` plugins."""
    return site_factory(
        "gpuscout-test-hostile", "1.0", PLUGINS, {"hang": "gpuscout_test_hang", "odd": "gpuscout_test_odd"}
    )


def child_env(site: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GPUSCOUT_PLUGINS", "GPUSCOUT_DISABLE_PLUGINS")}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return {**env, **extra}


def gpuscout(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or child_env(),
    )


def refusal(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``gpuscout ARGS`` in-process; assert exit 2, nothing on stdout and one line on stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "abc", ""])
def test_a_timeout_that_is_not_a_finite_positive_number_is_refused(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """`--timeout` must be finite and above zero."""
    assert "--timeout" in refusal(capsys, "list", "--timeout", value)


def test_an_infinite_timeout_is_refused_without_a_traceback() -> None:
    """`gpuscout list --timeout inf` in a real process is one line and exit 2."""
    out = gpuscout("list", "--timeout", "inf")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr


def test_a_missing_root_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`--root` naming nothing is refused instead of reporting an empty machine."""
    assert "/nonexistent" in refusal(capsys, "list", "--root", "/nonexistent/gpuscout")


def test_a_root_that_is_a_file_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`--root` naming a plain file is refused."""
    (tmp_path / "file").write_text("")
    assert "not a directory" in refusal(capsys, "plugins", "--root", str(tmp_path / "file"))


def test_an_existing_root_is_accepted(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """An existing folder passes the `--root` check."""
    assert gpuscout_cli(["list", "--json", "--root", str(tmp_path)]).code == 0


@pytest.mark.parametrize("value", ["", ",", " , "])
def test_an_empty_allow_list_is_refused(capsys: pytest.CaptureFixture[str], value: str) -> None:
    """`--plugins ''` would block every plugin silently, so it is refused."""
    assert "--plugins" in refusal(capsys, "plugins", "--plugins", value)


def test_a_refused_flag_is_refused_by_env_as_well(capsys: pytest.CaptureFixture[str]) -> None:
    """The selection commands share the checks (`env --timeout 0`)."""
    refusal(capsys, "env", "--timeout", "0")


def test_a_newline_in_a_bad_flag_stays_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A value with a line break is shown escaped, so the refusal is still one line."""
    assert "\\n" in refusal(capsys, "list", "--root", "/no\nsuch")


def test_plugin_names_are_split_on_commas_stripped_and_lower_cased() -> None:
    """The names the CLI hands the Scout are what a user meant by `' CUDA, Vulkan,'`."""
    assert plugin_names(" CUDA, Vulkan,,") == ["cuda", "vulkan"]


def test_an_allow_list_with_spaces_and_capitals_selects_those_plugins() -> None:
    """`--plugins 'CUDA, Vulkan'` keeps cuda and vulkan and disables the rest."""
    out = gpuscout("plugins", "--json", "--plugins", "CUDA, Vulkan")
    assert out.returncode == 0, out.stderr
    status = {r["name"]: r["status"] for r in json.loads(out.stdout)}
    assert status["cuda"] == status["vulkan"] == "ok"
    assert status["rocm"] == status["metal"] == "disabled"


def test_an_allow_list_argument_overrides_the_environment() -> None:
    """`--plugins cuda` under GPUSCOUT_PLUGINS=rocm uses cuda, not nothing."""
    out = gpuscout("plugins", "--json", "--plugins", "cuda", env=child_env(GPUSCOUT_PLUGINS="rocm"))
    status = {r["name"]: r["status"] for r in json.loads(out.stdout)}
    assert status["cuda"] == "ok" and status["rocm"] == "disabled", out.stderr


def test_an_unknown_name_in_the_deny_list_is_one_warning() -> None:
    """`--disable nosuch` works, with exactly one warning line naming the known plugins."""
    out = gpuscout("plugins", "--json", "--disable", "nosuch")
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("gpuscout: warning:")]
    assert len(warnings) == 1 and "nosuch" in warnings[0] and BUILTINS in warnings[0], out.stderr


def test_an_unknown_name_in_the_allow_list_is_an_error_naming_the_known_ones() -> None:
    """`--plugins nosuch` exits 2 with one line that lists the installed plugins."""
    out = gpuscout("plugins", "--plugins", "nosuch")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith("gpuscout: error:") and "nosuch" in out.stderr
    assert BUILTINS in out.stderr


def test_ctrl_c_during_a_hanging_plugin_exits_130_without_a_traceback(site: Path, tmp_path: Path) -> None:
    """SIGINT while a plugin hangs in enumerate ends `list` promptly with 130."""
    marker = tmp_path / "hanging"
    proc = subprocess.Popen(
        with_default_sigint(
            [sys.executable, "-m", "gpuscout", "list", "--plugins", "hang", "--timeout", "30"]
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(site, GPUSCOUT_TEST_MARKER=str(marker)),
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=3)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130 and "Traceback" not in err, err


def test_ctrl_c_in_process_returns_130() -> None:
    """A KeyboardInterrupt anywhere in a command makes main() return 130."""

    def interrupted(args: object) -> Scout:
        raise KeyboardInterrupt

    try:
        code = main(["list"], scout_factory=interrupted)
    except KeyboardInterrupt:  # caught here, or it would end the whole test session
        pytest.fail("main() let KeyboardInterrupt through")
    assert code == 130


# `env` gets a device (the `odd` plugin's): on a machine without one it exits 1, printing nothing.
@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["plugins"], ["env", "--plugins", "odd"]])
def test_a_reader_that_went_away_is_no_error(args: list[str], site: Path) -> None:
    """A closed pipe on stdout ends the command quietly: no traceback, no 'Exception ignored'."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "gpuscout", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env=child_env(site),
        )
    finally:
        os.close(write_end)
    # Only gpuscout's own lines may appear (hints on a machine without devices), nothing else.
    unexpected = [line for line in out.stderr.splitlines() if not line.startswith("gpuscout: ")]
    assert out.returncode == 0 and unexpected == [], out.stderr


@pytest.mark.parametrize("args", [["list", "--json"], ["env", "--plugins", "odd"]])
def test_a_closed_stdout_is_no_error(args: list[str], site: Path) -> None:
    """Started with stdout closed (`>&-`), a command prints nothing and fails with no traceback."""
    out = subprocess.run(
        [sys.executable, "-m", "gpuscout", *args],
        stdout=None,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env=child_env(site),
        preexec_fn=lambda: os.close(1),
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr


# Python turns a plain C locale into UTF-8 (PEP 538, PEP 540) unless told not to.
ASCII_LOCALE = {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


@pytest.mark.parametrize("setting", [{"PYTHONIOENCODING": "ascii"}, ASCII_LOCALE])
def test_an_ascii_terminal_shows_the_table_without_a_traceback(site: Path, setting: dict[str, str]) -> None:
    """A non-ASCII device name on an ASCII-only stdout is shown with replacements."""
    env = {k: v for k, v in child_env(site, COLUMNS="200").items() if k != "PYTHONIOENCODING"}
    out = subprocess.run(
        [sys.executable, "-m", "gpuscout", "list", "--plugins", "odd"],
        capture_output=True,
        env={**env, **setting},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert b"Traceback" not in out.stderr and out.stdout.isascii()
    assert b"[/beta]" in out.stdout


def test_an_ascii_terminal_gets_escaped_json(site: Path) -> None:
    """`list --json` on an ASCII-only stdout writes the name as JSON escapes."""
    out = subprocess.run(
        [sys.executable, "-m", "gpuscout", "list", "--json", "--plugins", "odd"],
        capture_output=True,
        timeout=120,
        env=child_env(site, PYTHONIOENCODING="ascii"),
    )
    assert out.returncode == 0, out.stderr
    names = [d["name"] for d in json.loads(out.stdout)["devices"]]
    assert names == ["\u00dcn\u00efc\u00f6d\u00e9 \u2713"]


def test_a_device_name_the_terminal_cannot_encode_is_one_line_in_env(
    machine: Callable[..., Callable[..., Scout]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Output the terminal cannot encode is an error line (exit 2), not a traceback."""
    factory = machine([DeviceInfo(id="\u2713", library="Vulkan", filter_id="\u2713")])

    def ascii_only(text: str) -> int:
        text.encode("ascii")
        return len(text)

    monkeypatch.setattr(sys.stdout, "write", ascii_only)
    assert main(["env"], scout_factory=factory) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "PYTHONIOENCODING" in err
