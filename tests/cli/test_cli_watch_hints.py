"""`gpuscout list --watch` and the hints printed when nothing is found."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout, hookimpl
from gpuscout.cli import build_parser
from gpuscout.cli._commands.list import watch
from gpuscout.cli._render.hints import hints
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner, injected, scout_of
from tests.conftest import with_default_sigint

LLVMPIPE = DeviceInfo(
    id="0",
    library="Vulkan",
    description="llvmpipe (LLVM 17.0.6, 256 bits)",
    software=True,
    total_memory=2 * GIB,
    free_memory=2 * GIB,
)
CARD = DeviceInfo(
    id="0", library="Fake", pci_id="0000:01:00.0", uuid="fake-0", total_memory=16 * GIB, free_memory=10 * GIB
)


class Noting:
    """A plugin that finds nothing and says why, naming a visibility variable."""

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        context.note("2 Fake device(s) hidden by FAKE_VISIBLE_DEVICES")
        return []


class Counting:
    """A plugin reporting ``CARD``, counting its enumerations, refreshing with ``free`` GiB
    free (or not at all when ``free`` is None)."""

    def __init__(self, free: int | None) -> None:
        self.free = free
        self.enumerations = 0

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        self.enumerations += 1
        return [CARD]

    @hookimpl
    def gpuscout_refresh(self, devices: Sequence[DeviceInfo], context: Any) -> Any:
        if self.free is None:
            return None
        return [d.evolve(free_memory=self.free * GIB) for d in devices if d.library == "Fake"]


def list_args(*argv: str) -> argparse.Namespace:
    parser, _ = build_parser("list")
    return parser.parse_args(["list", *argv])


def watched(scout: Scout, *argv: str, rounds: int = 3) -> list[dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert watch(list_args("--json", *argv), scout, 0.01, rounds=rounds) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_lone_software_device_is_named_with_the_option_that_keeps_it() -> None:
    """A machine whose only device is llvmpipe gets a hint naming it and --include-software."""
    found = scout_of(injected([LLVMPIPE])).discover()
    [line] = hints(found, {})
    assert "dropped 1 software device" in line and "llvmpipe" in line
    assert "--include-software" in line


def test_a_plugin_note_is_a_hint_with_the_value_of_the_variable_it_names() -> None:
    """A note naming a variable shows the value it has in the Scout's env, empty included."""
    found = scout_of(("fake", Noting())).discover()
    assert hints(found, {"FAKE_VISIBLE_DEVICES": ""}) == [
        "plugin fake: 2 Fake device(s) hidden by FAKE_VISIBLE_DEVICES (FAKE_VISIBLE_DEVICES='')"
    ]


def test_list_prints_hints_on_stderr_after_no_accelerators(gpuscout_cli: CliRunner) -> None:
    """Plain `list` without a device lists what it did on stdout and says why on stderr."""
    code, out, err = gpuscout_cli(["list"], [LLVMPIPE], builtins=False)
    assert code == 0 and "--include-software" not in out
    assert "gpuscout: hint: dropped 1 software device" in err and "--include-software" in err


def test_list_json_keeps_hints_off_stdout(gpuscout_cli: CliRunner) -> None:
    """`list --json` without a device prints only the document on stdout, the hints on stderr."""
    code, out, err = gpuscout_cli(["list", "--json"], plugins=[("fake", Noting())], builtins=False)
    assert code == 0 and json.loads(out)["devices"] == []
    assert "gpuscout: hint: plugin fake: 2 Fake device(s) hidden" in err


def test_list_gives_no_hints_when_a_device_is_ranked(gpuscout_cli: CliRunner) -> None:
    """A ranked device means nothing to explain: no hint on stderr."""
    code, _, err = gpuscout_cli(["list"], [CARD], plugins=[("fake", Noting())], builtins=False)
    assert code == 0 and "hint" not in err


def test_env_that_matches_nothing_is_followed_by_hints(gpuscout_cli: CliRunner) -> None:
    """`env best` on a machine with only llvmpipe fails and names --include-software."""
    code, out, err = gpuscout_cli(["env", "best"], [LLVMPIPE], builtins=False)
    assert code != 0 and out == ""
    assert "gpuscout: hint: dropped 1 software device" in err and "--include-software" in err


def test_watch_json_writes_one_compact_document_per_round() -> None:
    """Three rounds of `list --json --watch` are three lines, each a `list --json` document
    stamped with its time (RFC 3339, UTC, milliseconds)."""
    docs = watched(scout_of(("fake", Counting(free=12))))
    assert len(docs) == 3
    assert all(list(doc) == ["devices", "dropped", "system", "plugins", "timestamp"] for doc in docs)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["timestamp"]) for doc in docs)


def test_watch_refreshes_free_memory_between_discoveries() -> None:
    """After the first discovery, free memory comes from refresh, without rediscovering."""
    plugin = Counting(free=12)
    docs = watched(scout_of(("fake", plugin)))
    assert plugin.enumerations == 1
    assert [d["devices"][0]["free_memory"] for d in docs] == [10 * GIB, 12 * GIB, 12 * GIB]


def test_watch_rediscovers_when_refresh_marks_a_device_stale() -> None:
    """A device no plugin refreshed may be gone: the next round is a full discovery."""
    plugin = Counting(free=None)
    docs = watched(scout_of(("fake", plugin)))
    assert plugin.enumerations == 3
    assert all(not d["devices"][0].get("free_memory_stale") for d in docs)


def test_watch_in_a_pipe_separates_plain_listings_with_a_blank_line() -> None:
    """Without --json and not on a terminal, each round's listing follows a blank line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert watch(list_args("--watch"), scout_of(injected([CARD])), 0.01, rounds=2) == 0
    first, _, second = out.getvalue().partition("\n\n")
    assert "\x1b[2J" not in out.getvalue()
    assert "Fake" in first and "Fake" in second


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_watch_wants_a_positive_finite_number_of_seconds(value: str, gpuscout_cli: CliRunner) -> None:
    """A watch interval that is not a positive finite number is a usage error."""
    code, _, err = gpuscout_cli(["list", "--watch", value], builtins=False)
    assert code == 2 and "--watch" in err


def test_watch_defaults_to_two_seconds() -> None:
    """`--watch` without a number means every 2 seconds."""
    assert list_args("--watch").watch == 2.0 and list_args().watch is None


def test_ctrl_c_ends_a_real_watch_with_exit_0_and_whole_json_lines() -> None:
    """SIGINT ends `python -m gpuscout list --json --watch 0.2` with 0; each line is a document."""
    argv = [sys.executable, "-m", "gpuscout", "list", "--json", "--watch", "0.2"]
    proc = subprocess.Popen(
        with_default_sigint(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # started and listed once: SIGINT now meets the watch loop
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = [first, *rest.splitlines()]
    assert len(lines) >= 2
    assert all("devices" in json.loads(line) for line in lines)


class TwoCards:
    """Two Fake cards, the first with more free memory, both refreshed as they are."""

    CARDS = (
        CARD.evolve(id="0", pci_id="0000:01:00.0", uuid="fake-0", free_memory=12 * GIB),
        CARD.evolve(id="1", pci_id="0000:02:00.0", uuid="fake-1", free_memory=4 * GIB),
    )

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return list(self.CARDS)

    @hookimpl
    def gpuscout_refresh(self, devices: Sequence[DeviceInfo], context: Any) -> Any:
        return [d for d in devices if d.library == "Fake"]


def _two_cards(**options: Any) -> Scout:
    return Scout(plugins=["fake"], extra=[("fake", TwoCards())], entry_points=False, env={}, **options)


def test_watch_keeps_the_preference_in_every_refreshed_round() -> None:
    """`list --watch --prefer fake:1` ranks the preferred card first in every frame, the
    refreshed ones included, as discovery ranks it (the budgets' preference is applied by the
    library, not dropped by the command's own re-ranking)."""
    scout = Scout(
        plugins=["fake"], extra=[("fake", TwoCards())], entry_points=False, env={}, prefer=["fake:1"]
    )
    docs = watched(scout, rounds=3)
    assert [[d["id"] for d in doc["devices"]] for doc in docs] == [["1", "0"]] * 3


def test_refreshed_listing_ranks_with_the_discovery_s_preference() -> None:
    """The library's refreshed listing keeps the discovery's preference and reads fresh system
    memory; without a preference it ranks by free memory."""
    from gpuscout._discovery.refresh import refreshed_listing

    scout = Scout(
        plugins=["fake"], extra=[("fake", TwoCards())], entry_points=False, env={}, prefer=["fake:1"]
    )
    found = scout.discover()
    assert [d.id for d in found.devices] == ["1", "0"]
    again = refreshed_listing(found, scout.refresh(found.devices), scout.context())
    assert [d.id for d in again.devices] == ["1", "0"]
    plain = Scout(plugins=["fake"], extra=[("fake", TwoCards())], entry_points=False, env={})
    first = plain.discover()
    assert [
        d.id for d in refreshed_listing(first, plain.refresh(first.devices), plain.context()).devices
    ] == [
        "0",
        "1",
    ]
