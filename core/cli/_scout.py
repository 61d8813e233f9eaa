"""The Scout the command line opens by default: the scout options (``--plugins``, ``--root``,
``--replay`` and its settings, the budgets, ``--isolated``) turned into ``Scout`` keywords. A
host that runs the command line in-process passes its own ``scout_factory`` instead."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gpuscout.cli._budget_options import budget_options
from gpuscout.cli._common import DEFAULT_REPLAY_ENV, DEFAULT_ROOT, UsageError

if TYPE_CHECKING:
    from gpuscout.scout import Scout


def default_scout(args: argparse.Namespace) -> Scout:
    """The Scout the scout options ask for (raises GpuscoutError for an unknown allowed plugin)."""
    from gpuscout.scout import Scout

    replay = getattr(args, "replay", None)
    if replay is not None and args.root != DEFAULT_ROOT:
        raise UsageError(
            "--replay and --root exclude each other: a recording brings its own files (under root/)"
        )
    process_env = getattr(args, "replay_env", DEFAULT_REPLAY_ENV) == "process"
    env: Mapping[str, str] | None = os.environ if replay is not None and process_env else None
    settings = getattr(args, "replay_set", None) or ()
    if replay is not None and settings:
        from gpuscout._recording.replay import load

        replay = load(replay)
        env = dict(os.environ if process_env else replay.env)
        for setting in settings:
            name, _, value = setting.partition("=")
            env[name] = value
    return Scout(
        plugins=args.plugins,
        disable=args.disable,
        root=args.root,
        env=env,
        enumerate_timeout=args.timeout,
        replay=replay,
        **budget_options(args),
        isolate_imports=bool(getattr(args, "isolated", False)),
        recorder=getattr(args, "recorder", None),
    )
