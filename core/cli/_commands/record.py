"""``gpuscout record DIR``: a recording of this machine, which ``--replay DIR`` discovers on."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gpuscout.cli import _common as common

if TYPE_CHECKING:
    from gpuscout.cli._common import ScoutFactory, Subcommands

DESCRIPTION = (
    "Run one discovery in this process and write what it used to DIR (which must not exist, "
    "or be empty): the files the plugins read under the root (each at most 1 MiB), what each "
    "driver answered, the platform, and the environment variables discovery reads (never one "
    "whose name looks like a secret's). The format is in docs/recordings.md. `gpuscout "
    "--replay DIR list` then shows what this machine shows."
)


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``record`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "record", help, DESCRIPTION, color=False)
    common.add_scout_options(p)
    p.add_argument("dir", metavar="DIR", help="the recording's directory (created)")
    p.add_argument(
        "--anonymize",
        action="store_true",
        help="replace UUIDs, serial numbers, unique ids and the host name, consistently across the recording",
    )
    p.add_argument(
        "--machine", default="", metavar="TEXT", help="a description of the machine, kept in the manifest"
    )


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Discover with a recorder, then write the recording; one line says where it went."""
    from gpuscout._recording.record import Recorder, declared_families

    if getattr(args, "replay", None):
        raise common.UsageError(
            "record writes a recording of this machine; it cannot record "
            "a replay (copy the recording's directory instead)"
        )
    recorder = Recorder()
    args.recorder = recorder
    scout = common.open_scout(args, scout_factory)
    if getattr(scout, "recorder", None) is not recorder:
        raise common.UsageError("record needs the Scout the command line describes")
    found = scout.discover()
    families = declared_families(scout.plugin_manager.get_plugins())
    env = scout.env.recorded(families) if hasattr(scout.env, "recorded") else {}
    manifest = recorder.write(
        args.dir,
        platform=scout.platform,
        env=env,
        anonymize=bool(args.anonymize),
        machine=str(args.machine)[:1000],
    )
    for problem in manifest.get("problems", ()):
        common.warn(problem)
    # Every device the recording holds, a dropped one (llvmpipe, a Vulkan twin) too: a replay
    # finds it again, and "0 devices" for a recording of llvmpipe reads as an empty one.
    kept, dropped = len(found.devices), len(found.dropped)
    held = (
        f"{_count(kept + dropped, 'device')} ({kept} kept, {dropped} dropped)"
        if dropped
        else _count(kept, "device")
    )
    sys.stderr.write(
        common.printable(
            f"gpuscout: recorded {held}, {_count(len(recorder.paths), 'path')} and the answers of "
            f"{_count(len(recorder.answers), 'plugin')} in {args.dir}"
        )
        + "\n"
    )
    return common.SUCCESS


def _count(n: int, noun: str) -> str:
    """``1 device``, ``2 devices``, ``0 devices``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
