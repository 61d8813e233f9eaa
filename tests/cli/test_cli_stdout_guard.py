"""Stdout is gpuscout's alone: what a plugin prints (``print``, ``os.write(1, ...)``, a C
library's ``printf``) goes to stderr, so `list --json` parses and `env` is safe to ``eval``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# Prints at import and in enumerate through every path a plugin or vendor SDK has to stdout.
CHATTY = """
    import ctypes
    import os
    from gpuscout import DeviceInfo, hookimpl

    print("export EVIL_IMPORT=1")

    @hookimpl
    def gpuscout_enumerate(context):
        print("export EVIL_PRINT=1", flush=True)
        os.write(1, b"export EVIL_WRITE=1\\n")
        try:  # buffered by the C library, flushed only at exit unless gpuscout flushes it
            ctypes.CDLL(None).printf(b"export EVIL_PRINTF=1\\n")
        except (AttributeError, OSError, TypeError):
            os.write(1, b"export EVIL_PRINTF=1\\n")
        return [DeviceInfo(id="GPU-c0", library="CUDA", filter_id="GPU-c0", uuid="GPU-c0")]
"""
EVIL = ("EVIL_IMPORT", "EVIL_PRINT", "EVIL_WRITE", "EVIL_PRINTF")


@pytest.fixture(scope="module")
def site(site_factory: Callable[..., Path]) -> Path:
    """A folder holding the distribution with the ``chatty`` plugin."""
    return site_factory(
        "gpuscout-test-chatty", "1.0", {"gpuscout_test_chatty": CHATTY}, {"chatty": "gpuscout_test_chatty"}
    )


def gpuscout(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``gpuscout ARGS`` in a real process with the chatty plugin installed."""
    # Without PYTHONUNBUFFERED the C library buffers its stdout, as it does for most users.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GPUSCOUT_PLUGINS", "GPUSCOUT_DISABLE_PLUGINS", "PYTHONUNBUFFERED")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env.update(VK_DRIVER_FILES="/nonexistent.json", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_list_json_stays_parseable_when_a_plugin_prints(site: Path) -> None:
    """`list --json` stdout is only the JSON document, with the plugin's text on stderr."""
    out = gpuscout(site, "list", "--json", "--plugins", "chatty")
    assert out.returncode == 0, out.stderr
    assert [d["id"] for d in json.loads(out.stdout)["devices"]] == ["GPU-c0"]
    assert all(f"export {name}=1" in out.stderr for name in EVIL), out.stderr


def test_env_prints_no_line_a_plugin_wrote(site: Path) -> None:
    """`env` stdout holds the selection's exports and nothing a plugin printed."""
    out = gpuscout(site, "env", "--plugins", "chatty,cuda")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "export CUDA_VISIBLE_DEVICES='GPU-c0'\n"


def test_plugins_json_stays_parseable_when_a_plugin_prints(site: Path) -> None:
    """`plugins --json` stdout parses as JSON and names the chatty plugin."""
    out = gpuscout(site, "plugins", "--json", "--plugins", "chatty")
    assert out.returncode == 0, out.stderr
    assert {r["name"]: r["status"] for r in json.loads(out.stdout)}["chatty"] == "ok"


def test_the_table_stays_free_of_plugin_text(site: Path) -> None:
    """`list` shows the table on stdout and the plugin's text only on stderr."""
    out = gpuscout(site, "list", "--plugins", "chatty")
    assert out.returncode == 0, out.stderr
    assert "GPU-c0" in out.stdout and "EVIL" not in out.stdout


def test_an_exec_child_writes_to_the_real_stdout(site: Path) -> None:
    """`exec` hands its child the real stdout, while the plugin's text stays on stderr."""
    out = gpuscout(site, "exec", "--plugins", "chatty", "--", sys.executable, "-c", "print('child out')")
    assert (out.returncode, out.stdout) == (0, "child out\n"), out.stderr
