"""Numbers too large for a float and header-unsafe tokens are refused at the border with a
GpuscoutError (one line on the command line), never an OverflowError or an injected header."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from gpuscout import GpuscoutError, Scout


@pytest.mark.parametrize("name", ["enumerate_timeout", "hook_timeout"])
def test_a_timeout_past_a_floats_range_is_a_gpuscout_error(name: str) -> None:
    """Scout(enumerate_timeout=10**400) raises GpuscoutError naming the option, not OverflowError."""
    with pytest.raises(GpuscoutError, match=name):
        options: dict[str, Any] = {name: 10**400}
        Scout(plugins=[], entry_points=False, **options)


def test_a_runner_idle_exit_past_a_floats_range_is_a_gpuscout_error() -> None:
    """serve(idle_exit=10**400) raises GpuscoutError before binding anything."""
    from gpuscout.runner._server import serve

    with pytest.raises(GpuscoutError, match="idle_exit"):
        serve(lambda: [], 0, idle_exit=10**400)


@pytest.mark.parametrize("token", ["abc\r\nX-Evil: 1", "two words", "é", "x" * 257])
def test_a_runner_token_that_is_not_one_header_value_is_refused(token: str) -> None:
    """serve(token=...) with a CR LF, a space, non-ASCII or 257 characters raises GpuscoutError."""
    from gpuscout.runner._server import serve

    with pytest.raises(GpuscoutError, match="visible ASCII"):
        serve(lambda: [], 0, token=token)


def test_gpuscout_runner_refuses_a_token_with_cr_lf_in_one_line() -> None:
    """gpuscout runner with GPUSCOUT_RUNNER_TOKEN holding CR LF exits 2 with one line, serving
    nothing (it would have written the header that follows)."""
    env = {**os.environ, "GPUSCOUT_RUNNER_TOKEN": "t\r\nSet-Cookie: x=1"}
    done = subprocess.run(
        [sys.executable, "-m", "gpuscout", "runner", "--port", "0", "--plugins", "cuda"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, len(done.stderr.strip().splitlines())) == (2, "", 1)
    assert "visible ASCII" in done.stderr
