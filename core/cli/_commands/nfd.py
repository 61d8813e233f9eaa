"""``gpuscout nfd``: this node's Kubernetes Node Feature Discovery labels, as one feature file."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuscout.cli import _common as common
from gpuscout.cli._output import output
from gpuscout.errors import GpuscoutError

if TYPE_CHECKING:
    from gpuscout.cli._common import ScoutFactory, Subcommands

# Spelled out here so that building the parser imports no more than argparse (gpuscout.cli).
NFD_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
DEFAULT_PREFIX = "gpuscout.io"
DEFAULT_NAME = "gpuscout"
#: Longest --expiry text read (``2562047h47m16.854775807s``, Go's longest, is 24 characters).
_MAX_DURATION = 64

DESCRIPTION = (
    "Discover this node's accelerators and write their labels as one Node Feature "
    "Discovery local feature file (device counts per library and per model, memory, "
    "compute and driver ranges, flash attention, homogeneity), atomically: NFD reads "
    "the old file or the new one, never a part. A node without accelerators gets a "
    "file too (devices=0). Exit 0 on success, 2 with one line on stderr when the "
    "file cannot be written. See docs/nfd.md."
)


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``nfd`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "nfd", help, DESCRIPTION, color=False)
    common.add_scout_options(p)
    p.add_argument(
        "--dir",
        default=NFD_DIR,
        metavar="DIR",
        help=f"the features.d directory to write into (default {NFD_DIR})",
    )
    p.add_argument(
        "--name",
        default=DEFAULT_NAME,
        metavar="NAME",
        help=f"the file's name in DIR (default {DEFAULT_NAME}; no leading dot)",
    )
    p.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help=f"label prefix, a DNS subdomain outside kubernetes.io and k8s.io except "
        f"NFD's feature.node.kubernetes.io (default {DEFAULT_PREFIX})",
    )
    p.add_argument(
        "--expiry",
        metavar="DURATION",
        help="add '# +expiry-time=' now + DURATION (Go style: 90s, 30m, 1h, 2h30m), "
        "after which NFD drops the labels unless the file is written again",
    )
    p.add_argument("--dry-run", action="store_true", help="print the file on stdout instead of writing it")
    common.add_include_software(p, "count software devices (llvmpipe) instead of dropping them")


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Check the options, discover, then write the file (or print it with ``--dry-run``)."""
    from gpuscout.cluster import nfd

    nfd.check_prefix(args.prefix)  # a bad option fails before any discovery
    nfd.check_name(args.name)  # with --dry-run too: a dry run says what a real run would do
    expiry = None
    if args.expiry is not None:
        if len(args.expiry) > _MAX_DURATION:
            # Longer than any duration a feature file can carry; parsing it could exceed
            # Python's limit on int digits.
            raise GpuscoutError(
                f"--expiry: expected a duration such as 90s, 30m, 1h or 2h30m, "
                f"got {len(args.expiry)} characters (at most {_MAX_DURATION})"
            )
        try:
            expiry = nfd.parse_duration(args.expiry)
        except GpuscoutError as exc:
            raise GpuscoutError(f"--expiry: {exc}") from None
    scout = common.open_scout(args, scout_factory)
    found = scout.discover(include_software=args.include_software, isolated=args.isolated)
    common.warn_failed_plugins(found.plugins)
    labels = nfd.labels(found, scout)
    text = nfd.render(labels, prefix=args.prefix, expiry=expiry)
    if args.dry_run:
        output().write(text)
        return common.SUCCESS
    path = nfd.write(args.dir, text, name=args.name)
    output().write(f"wrote {common.printable(path)} ({len(labels)} labels)\n")
    return common.SUCCESS
