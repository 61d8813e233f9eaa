"""``gpuscout nfd``: the command in-process over injected devices, and the real console script
writing into a full and a read-only file system (a tmpfs in a private mount namespace)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscout.cli import main
from gpuscout.testing import CliRunner
from tests.test_nfd import MIXED, nfd_file_problems, parse

GPUSCOUT = str(Path(sys.executable).parent / "gpuscout")
#: No Vulkan driver at all: the console script finds nothing, whatever the machine has.
NO_DRIVER = {"VK_DRIVER_FILES": "/nonexistent/gpuscout-test-icd.json"}


def run_main(capsys: pytest.CaptureFixture[str], factory: Any, *argv: str) -> tuple[int, str, str]:
    code = main(["nfd", *argv], scout_factory=factory)
    out, err = capsys.readouterr()
    return code, out, err


def test_dry_run_prints_the_file_and_writes_nothing(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """--dry-run prints a valid feature file on stdout and leaves the directory empty."""
    code, out, err = gpuscout_cli(["nfd", "--dry-run", "--dir", str(tmp_path)], MIXED)
    assert (code, err) == (0, "")
    assert parse(out)["gpuscout.io/devices"] == "5"
    assert os.listdir(tmp_path) == []


def test_dir_gets_the_file_and_stdout_names_it(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """--dir writes the same text --dry-run prints and says where, with the label count."""
    _, printed, _ = gpuscout_cli(["nfd", "--dry-run"], MIXED)
    code, out, err = gpuscout_cli(["nfd", "--dir", str(tmp_path)], MIXED)
    assert (code, err) == (0, "")
    assert (tmp_path / "gpuscout").read_text() == printed
    assert out == f"wrote {tmp_path / 'gpuscout'} ({len(printed.splitlines())} labels)\n"


def test_an_empty_node_gets_a_file_too(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """No device still writes a file that says devices=0."""
    assert gpuscout_cli(["nfd", "--dir", str(tmp_path)]).code == 0
    assert parse((tmp_path / "gpuscout").read_text())["gpuscout.io/devices"] == "0"


def test_prefix_expiry_and_name_options_shape_the_file(gpuscout_cli: CliRunner, tmp_path: Path) -> None:
    """--prefix, --expiry and --name change the prefix, add the expiry line and the file name."""
    code, _, _ = gpuscout_cli(
        [
            "nfd",
            "--dir",
            str(tmp_path),
            "--name",
            "gpus",
            "--prefix",
            "feature.node.kubernetes.io",
            "--expiry",
            "1h",
        ],
        MIXED,
    )
    text = (tmp_path / "gpus").read_text()
    assert code == 0 and nfd_file_problems(text) == []
    assert text.startswith("# +expiry-time=") and "\nfeature.node.kubernetes.io/devices=5\n" in text


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--prefix", "kubernetes.io"], "prefix 'kubernetes.io' is in a domain"),
        (["--prefix", "foo.k8s.io"], "prefix 'foo.k8s.io' is in a domain"),
        (["--prefix", "GPU.io"], "prefix 'GPU.io' is not a DNS subdomain"),
        (["--expiry", "soon"], "--expiry: expected a duration"),
        (["--expiry", "0s"], "--expiry: expected a duration greater than 0"),
        (["--name", ".hidden"], "file name '.hidden'"),
        (["--dir", "/nonexistent/features.d"], "/nonexistent/features.d: no such directory"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(
    gpuscout_cli: CliRunner, tmp_path: Path, argv: list[str], words: str
) -> None:
    """A bad prefix, expiry, name or directory is one 'gpuscout: error:' line and exit 2."""
    code, out, err = gpuscout_cli(["nfd", "--dir", str(tmp_path), *argv], MIXED)
    assert (code, out) == (2, "")
    assert err.startswith("gpuscout: error: ") and err.count("\n") == 1 and words in err
    assert os.listdir(tmp_path) == []


def test_a_failed_plugin_is_warned_about_and_the_file_still_written(
    gpuscout_cli: CliRunner, tmp_path: Path
) -> None:
    """A plugin that raises is named on stderr, and the file says discovery.problems=1."""
    from gpuscout.plugin import hookimpl

    class Broken:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> Any:
            raise RuntimeError("driver crashed")

    code, _, err = gpuscout_cli(["nfd", "--dir", str(tmp_path)], plugins=[("broken", Broken())])
    assert code == 0 and "plugin broken failed" in err
    assert parse((tmp_path / "gpuscout").read_text())["gpuscout.io/discovery.problems"] == "1"


# -- the console script -------------------------------------------------------------------------------


def test_console_script_dry_run_on_this_machine_follows_the_rules(
    lavapipe_env: dict[str, str], env: dict[str, str]
) -> None:
    """`gpuscout nfd --dry-run --plugins vulkan` (lavapipe) prints a valid file, exit 0."""
    for extra in ([], ["--include-software"]):
        done = subprocess.run(
            [GPUSCOUT, "nfd", "--dry-run", "--plugins", "vulkan", *extra],
            env={**env, **lavapipe_env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stderr) == (0, "")
        got = parse(done.stdout)
        assert got["gpuscout.io/devices"] == got["gpuscout.io/vulkan.count"]
        assert got["gpuscout.io/cuda.count"] == "0"


def test_console_script_writes_a_valid_file(env: dict[str, str], tmp_path: Path) -> None:
    """`gpuscout nfd --dir DIR` with every plugin writes a valid file and nothing else."""
    done = subprocess.run(
        [GPUSCOUT, "nfd", "--dir", str(tmp_path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith(f"wrote {tmp_path}/gpuscout (")
    assert nfd_file_problems((tmp_path / "gpuscout").read_text()) == []
    assert os.listdir(tmp_path) == ["gpuscout"]


#: Mounts a small tmpfs on $1 in this private namespace, puts an old file there, fills it or
#: makes it read-only ($MODE), runs the rest of the arguments, and reports what is left.
SCRIPT = r"""
set -u
dir=$1; shift
mount -t tmpfs -o size=64k,mode=0755 tmpfs "$dir" || exit 90
printf 'old\n' > "$dir/gpuscout"
if [ "$MODE" = full ]; then dd if=/dev/zero of="$dir/filler" bs=4096 >/dev/null 2>&1; fi
if [ "$MODE" = ro ]; then mount -o remount,ro "$dir" || exit 91; fi
"$@" 2>"$ERR"
echo "rc=$?"
ls -A "$dir" | tr '\n' ' '
echo
cat "$dir/gpuscout"
"""


@pytest.fixture(scope="module")
def private_tmpfs(tmp_path_factory: pytest.TempPathFactory) -> bool:
    """Whether this machine lets an unprivileged private mount namespace mount a tmpfs."""
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path_factory.mktemp("probe")
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--map-root-user",
            "sh",
            "-c",
            'mount -t tmpfs -o size=64k tmpfs "$1"',
            "sh",
            str(probe),
        ],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0


@pytest.mark.parametrize(
    ("mode", "reason", "code"),
    [
        ("full", "no space left on device", errno.ENOSPC),
        ("ro", "read-only file system", errno.EROFS),
    ],
)
def test_a_full_or_read_only_directory_gives_exit_2_and_no_partial_file(
    private_tmpfs: bool,
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    machine: Callable[..., Any],
    capsys: pytest.CaptureFixture[str],
    mode: str,
    reason: str,
    code: int,
) -> None:
    """A full or read-only file system: exit 2, one stderr line, the old file kept, no temp file.

    Real where the machine allows it: the console script writes into a 64 kB tmpfs (filled up,
    or remounted read-only) in a private mount namespace (``unshare --mount --map-root-user``;
    chmod cannot make a directory read-only for root). Elsewhere the same failure is injected
    in-process (os.write raising ENOSPC, os.open raising EROFS).
    """
    target = tmp_path / "features.d"
    target.mkdir()
    if private_tmpfs:
        err = tmp_path / "stderr"
        done = subprocess.run(
            [
                "unshare",
                "--mount",
                "--map-root-user",
                "sh",
                "-c",
                SCRIPT,
                "sh",
                str(target),
                GPUSCOUT,
                "nfd",
                "--dir",
                str(target),
                "--plugins",
                "vulkan",
            ],
            env={**env, **NO_DRIVER, "MODE": mode, "ERR": str(err)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        rc, left, old = done.stdout.splitlines()
        stderr = err.read_text()
        assert rc == "rc=2"
        assert left.split() == (["filler", "gpuscout"] if mode == "full" else ["gpuscout"])
        assert old == "old"
    else:
        (target / "gpuscout").write_text("old\n")

        def fail(*args: Any) -> Any:
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(os, "write" if mode == "full" else "open", fail)
        rc_, _, stderr = run_main(capsys, machine(MIXED), "--dir", str(target))
        monkeypatch.undo()
        assert rc_ == 2
        assert os.listdir(target) == ["gpuscout"] and (target / "gpuscout").read_text() == "old\n"
    assert stderr == f"gpuscout: error: cannot write NFD features to {target}: {reason}\n"
