"""``gpuscout list``: the devices, best first; with ``--explain``, why that order."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from gpuscout.cli import _common as common
from gpuscout.cli._output import output

if TYPE_CHECKING:
    from gpuscout._records.device import DeviceInfo
    from gpuscout._records.results import Discovery
    from gpuscout.cli._common import ScoutFactory, Subcommands
    from gpuscout.scout import Scout

DESCRIPTION = (
    "Discover the accelerators of this machine and list them best first: discrete "
    "before integrated, then free memory descending, then library and id. Devices "
    "dropped as duplicates or software renderers are listed with the reason. Devices the "
    "runtime would not use unless selected (a device outside its library's default "
    "set; see unused_reason in --json) rank after every device it would use and "
    "before software devices; "
    "plugins that failed are named on stderr. Exit 0 also when nothing is found, "
    "5 when every plugin that ran failed or timed out; --watch ends with 0 on Ctrl-C."
)

#: ``--format`` values; without it: ``table`` on a terminal, ``tsv`` in a pipe.
FORMATS = ("table", "tsv", "csv", "json")


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``list`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "list", help, DESCRIPTION)
    common.add_scout_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (--format json)")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="table (the terminal's default), tsv (tab-separated lines, a pipe's "
        "default), csv (the same rows as CSV, dropped devices with rank "
        "'dropped') or json",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="only the selector each device answers to (cuda:0: its runtime's own number), "
        "one per line, best first",
    )
    common.add_include_software(p, "rank software devices (llvmpipe) instead of dropping them")
    p.add_argument(
        "--validate", action="store_true", help="initialise devices that need it in a child process first"
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="then say why each device ranks where it does, why each dropped one was "
        'dropped and what each plugin did (with --json: an "explain" key)',
    )
    p.add_argument(
        "--watch",
        nargs="?",
        const=DEFAULT_WATCH,
        type=common.seconds,
        metavar="SECONDS",
        help=f"list again every SECONDS (default {DEFAULT_WATCH:g}) until Ctrl-C: "
        "redrawn in place on a terminal, one JSON object per line with --json",
    )


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Discover, then print the table (or the JSON document) and, if asked, the explanation.
    With ``--validate`` and stderr on a terminal, each validated device gets a progress line
    there (``gpuscout.runner.validation_progress``); nothing extra otherwise."""
    if args.validate and _on_terminal(sys.stderr):
        from gpuscout.runner import validation_progress

        with validation_progress(_ValidationLines(sys.stderr)):
            return _list(args, scout_factory)
    return _list(args, scout_factory)


def _on_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):  # closed, or not a file at all
        return False


class _ValidationLines:
    """One line per validated device, ``validating CUDA GPU-x ...``, completed in place with
    ``ok (1.2 s)`` or ``failed (30.0 s)`` when its child answers (cursor moves: a terminal)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.rows: list[int] = []  # id() of each device, in the order of the lines

    def __call__(self, device: DeviceInfo, state: str, elapsed: float) -> None:
        label = common.printable(f"validating {device.library} {device.id} ...")
        if state == "started":
            self.rows.append(id(device))
            self.stream.write(f"{label}\n")
        elif id(device) in self.rows:
            up = len(self.rows) - self.rows.index(id(device))
            self.stream.write(f"\x1b[{up}A\r{label} {state} ({elapsed:.1f} s)\x1b[K\x1b[{up}B\r")
        self.stream.flush()


def _list(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    _check_format(args)
    scout = common.open_scout(args, scout_factory)
    if _on_a_tree(args) and args.validate:
        # A tree holds files, not a driver to initialise: a child would re-read the same files
        # (proving nothing) while driver-backed plugins there answer for this machine's real
        # devices, so every device read from the tree would be dropped as "not seen".
        common.warn(
            f"--validate skipped under --root {args.root}: a recorded tree has no driver "
            "to initialise (as with --replay)"
        )
        args = argparse.Namespace(**{**vars(args), "validate": False})
    if getattr(args, "watch", None) is not None:
        return watch(args, scout, args.watch)
    found = _discover(args, scout)
    code = _print(args, found)
    if not found.devices:
        from gpuscout.cli._render.hints import again_for, print_for

        print_for(found, scout.env, listed=True, again=again_for(scout))
    if code == common.SUCCESS and common.every_plugin_failed(found.plugins):
        return common.PLUGINS_FAILED
    return code


def _check_format(args: argparse.Namespace) -> None:
    """Settle ``args.format`` (``--json`` is ``--format json``) and refuse what cannot combine."""
    if args.json and args.format not in (None, "json"):
        raise common.UsageError(f"--json and --format {args.format} exclude each other")
    if args.json:
        args.format = "json"
    if args.quiet and args.format is not None:
        raise common.UsageError(
            f"-q prints selectors only: it excludes --format {args.format}"
            + (" (--json)" if args.json else "")
        )
    if args.explain and (args.quiet or args.format == "csv"):
        raise common.UsageError(
            "--explain goes with the table, tsv and json forms, not with "
            + ("-q" if args.quiet else "--format csv")
        )
    args.json = args.format == "json"


def _on_a_tree(args: argparse.Namespace) -> bool:
    return str(getattr(args, "root", common.DEFAULT_ROOT)) != common.DEFAULT_ROOT


def _discover(args: argparse.Namespace, scout: Scout) -> Discovery:
    found = scout.discover(
        include_software=args.include_software, validate=args.validate, isolated=args.isolated
    )
    common.warn_failed_plugins(found.plugins)
    common.warn_budgets(found, args)
    return found


def _print(
    args: argparse.Namespace, found: Discovery, timestamp: str | None = None, header: bool = True
) -> int:
    """One listing of ``found`` on stdout: the JSON document, the selectors, the CSV rows, or
    the table (and explanation); ``timestamp`` (a watch) goes into the document, into a first
    ``timestamp`` column of the CSV rows (``header``: with the header row; a watch prints it
    once, so its CSV stays one table), or first on a line of its own."""
    if args.json:
        from gpuscout._records.encode import unstructure  # no cattrs: writing needs no converter

        document = unstructure(found)
        if args.explain:
            from gpuscout.cli._render.explain import explain

            document["explain"] = explain(found)
        if timestamp is not None:
            document["timestamp"] = timestamp
        _print_json(args, document)
        return common.SUCCESS
    fmt = getattr(args, "format", None)
    if fmt == "csv":
        output().write(csv_discovery(found, timestamp, header))
        return common.SUCCESS
    if timestamp is not None:
        output().write(f"# {timestamp}\n")
    if getattr(args, "quiet", False):
        from gpuscout._selection.numbering import selector_names

        output().write("".join(f"{_plain(s)}\n" for s in selector_names(found.devices, found.numbering)))
        return common.SUCCESS
    if fmt == "tsv":
        from gpuscout.cli._render.plain import plain_discovery  # no rich for the plain form

        output().write(plain_discovery(found))
        return _explained(args, found)
    from gpuscout.cli._render.table import print_discovery

    color = getattr(args, "color", "auto")
    if fmt == "table":
        from gpuscout.cli._render.table import stdout_console, use_color

        print_discovery(found, console=stdout_console(use_color(color, _on_terminal(output()))))
    else:
        print_discovery(found, color=color)
    return _explained(args, found)


def _explained(args: argparse.Namespace, found: Discovery) -> int:
    """With ``--explain``, the explanation after the table; SUCCESS."""
    if args.explain:
        from gpuscout.cli._render.explain import explain, explain_lines, write_explanation

        plain = getattr(args, "format", None) == "tsv"  # plain lines asked for, even on a terminal
        write_explanation(explain_lines(explain(found)), output(), wrap=not plain)
    return common.SUCCESS


def _plain(value: str) -> str:
    return common.printable(value).replace("\t", " ") or "-"


def csv_discovery(found: Discovery, timestamp: str | None = None, header: bool = True) -> str:
    """``--format csv``: the rows of the tab-separated form (same columns and values), as CSV;
    a dropped device is a row with rank ``dropped`` and the reason in ``note``; no system line.
    With ``timestamp`` (``--watch``) every row starts with it, in a ``timestamp`` column;
    ``header`` False leaves the header row out (a watch's later listings)."""
    import csv
    import io

    from gpuscout.cli._render.plain import DEVICE_COLUMNS, plain_discovery

    lines = plain_discovery(found).splitlines()
    rows: list[list[str]] = []
    for line in lines[1 : len(found.devices) + 1]:
        rows.append(line.split("\t"))
    for line in lines[len(found.devices) + 1 : len(found.devices) + 1 + len(found.dropped)]:
        # "# dropped", library, id, description, pci_id, reason
        _, library, id_, description, pci_id, reason = (line.split("\t") + [""] * 6)[:6]
        row = dict.fromkeys(DEVICE_COLUMNS, "-")
        row.update(
            rank="dropped", library=library, id=id_, description=description, pci_id=pci_id, note=reason
        )
        rows.append([row[c] for c in DEVICE_COLUMNS])
    head = [list(DEVICE_COLUMNS)] if header else []
    if timestamp is not None:
        head = [["timestamp", *h] for h in head]
        rows = [[timestamp, *row] for row in rows]
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(head + rows)
    return text.getvalue()


# -- --watch --------------------------------------------------------------------------------------

#: ``--watch`` without a number: seconds between listings.
DEFAULT_WATCH = 2.0
#: ``--watch`` rediscovers at least every this many listings (free memory alone in between).
REDISCOVER_EVERY = 15
# Home the cursor and clear the screen: a terminal's listing is redrawn in place.
_CLEAR = "\x1b[H\x1b[2J"


def _print_json(args: argparse.Namespace, document: Any) -> None:
    if getattr(args, "watch", None) is None:
        common.print_json(document)
        return
    # JSON Lines: one compact object per listing, flushed so a reader sees each at once.
    stream = output()
    stream.write(json.dumps(document, separators=(",", ":")) + "\n")
    stream.flush()


def timestamp() -> str:
    """Now as RFC 3339 in UTC with milliseconds (``2026-12-01T15:30:00.123Z``): each watch frame."""
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def watch(args: argparse.Namespace, scout: Scout, interval: float, rounds: int | None = None) -> int:
    """List every ``interval`` seconds until Ctrl-C (or ``rounds`` listings); returns 0 either way:
    Ctrl-C is how a watch ends, so it is its success, not 130.

    The first listing is a full discovery. The next ones bring free memory up to date with
    ``Scout.refresh`` (cheap), and rediscover instead when the device set may have changed: when
    the refresh marks a device stale (its plugin no longer answers for it), when no device was
    found (a refresh of nothing cannot notice a new one), or every ``REDISCOVER_EVERY``
    listings (a device that appeared beside the known ones). With ``--json`` each listing is one
    line (JSON Lines) with a ``"timestamp"`` key; on a terminal the screen is cleared and
    redrawn; in a pipe the plain listings follow each other, a blank line between. Every
    table or tab-separated listing starts with a ``# TIMESTAMP`` line (RFC 3339, UTC); CSV
    rows carry it in a first ``timestamp`` column under one header row, so that the whole
    watch reads as one CSV table. Hints for an empty
    listing go to stderr when they change.
    """
    import time

    args = argparse.Namespace(**{**vars(args), "watch": interval})  # JSON Lines from _print
    stream = output()
    # CSV is one table for the whole watch: a timestamp column, one header, no blank lines.
    csv_rows = getattr(args, "format", None) == "csv"
    on_terminal = not args.json and not csv_rows and _on_terminal(stream)
    found: Discovery | None = None
    since = 0  # listings since the last full discovery
    shown_hints: list[str] | None = None
    done = 0
    try:
        while rounds is None or done < rounds:
            if done:
                time.sleep(interval)
            found, since = _next_listing(args, scout, found, since)
            if on_terminal:
                stream.write(_CLEAR)
            elif done and not args.json and not csv_rows:
                stream.write("\n")
            _print(args, found, timestamp(), header=not done)
            stream.flush()
            shown_hints = _watch_hints(scout, found, shown_hints)
            done += 1
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a watch ends: success, not 130
    return common.SUCCESS


def _next_listing(
    args: argparse.Namespace, scout: Scout, found: Discovery | None, since: int
) -> tuple[Discovery, int]:
    """The next listing and the count of listings since the last full discovery (see watch)."""
    if found is None or not found.devices or since + 1 >= REDISCOVER_EVERY:
        return _discover(args, scout), 0
    fresh = scout.refresh(found.devices)
    if any(d.free_memory_stale for d in fresh):
        return _discover(args, scout), 0
    from gpuscout._discovery.refresh import refreshed_listing

    return refreshed_listing(found, fresh, scout.context()), since + 1


def _watch_hints(scout: Scout, found: Discovery, shown: list[str] | None) -> list[str]:
    from gpuscout.cli._render.hints import again_for, brief_hints, write_hints

    lines = [] if found.devices else brief_hints(found, scout.env, listed=True, again=again_for(scout))
    if lines and lines != shown:
        write_hints(lines)
        sys.stderr.flush()
    return lines
