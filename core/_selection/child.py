"""What a child started for a selection gets: the variables added, its whole environment, its CPUs.

``gpuscout env``, ``gpuscout exec`` and ``gpuscout exec --fit`` all start (or describe) a child
that must see exactly some devices. The decisions are made here, once:

* the visibility variables: the plugins' ``visible_env`` for the devices, or the ones a fit
  decided (``visible``, ggml's order and names); with ``isolate`` every other vendor's devices
  hidden too (``gpuscout._selection.visibility.isolation_env``), and a note for a vendor that
  cannot be hidden;
* the environment the child starts from (``child_base``): the one gpuscout's plugins saw, except
  on a replay, whose recorded environment feeds its discovery only: a child (the ``--verify``
  child, the command ``exec`` runs, found on this machine's PATH) runs on this machine, with this
  process's own environment;
* with ``cpu_affinity``, the CPUs local to the devices (``gpuscout._selection.affinity``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from gpuscout._records.device import DeviceInfo
from gpuscout._selection.affinity import Affinity
from gpuscout._selection.execute import child_environment
from gpuscout._selection.visibility import EnvSource, SelectionEnv, isolation_env, selection_env


class ChildSource(EnvSource, Protocol):
    """What this module needs from a Scout: the visibility hooks, the replay and the environment."""

    replay: Any
    env: Mapping[str, str]

    def cpu_affinity(self, devices: Sequence[DeviceInfo]) -> Affinity:
        """The CPUs local to ``devices``."""
        ...


@attrs.frozen
class ChildSetup:
    """A child's set-up for ``devices``: ``added`` the variables gpuscout adds, ``env`` the
    child's whole environment (``child_base`` plus ``added``, ``added`` winning), ``notes``
    what could not be hidden, ``affinity`` its CPUs (None when not asked)."""

    devices: tuple[DeviceInfo, ...]
    added: Mapping[str, str]
    env: Mapping[str, str]
    notes: tuple[str, ...] = ()
    affinity: Affinity | None = None

    @property
    def cpus(self) -> frozenset[int] | None:
        """The CPUs to start the child on; None: leave them as they are."""
        return self.affinity.cpus if self.affinity is not None else None


def child_base(scout: ChildSource) -> Mapping[str, str]:
    """The environment a child starts from: the scout's, or on a replay this process's own."""
    return os.environ if scout.replay is not None else scout.env


def child_setup(
    scout: ChildSource,
    devices: Sequence[DeviceInfo],
    *,
    isolate: bool = False,
    cpu_affinity: bool = False,
    visible: Mapping[str, str] | None = None,
) -> ChildSetup:
    """Everything a child that must see exactly ``devices`` needs (see the module's docstring).

    ``visible`` replaces the plugins' visibility variables (a fit's ``FitResult.env``, whose
    order is ggml's); isolation still adds the other vendors' hide values around it.
    """
    if visible is None:
        chosen = selection_env(scout, devices, isolate=isolate)
    elif isolate:
        chosen = isolation_env(scout, devices, visible)
    else:
        chosen = SelectionEnv(dict(visible))
    return ChildSetup(
        devices=tuple(devices),
        added=dict(chosen.env),
        env=child_environment(chosen.env, child_base(scout)),
        notes=chosen.notes,
        affinity=scout.cpu_affinity(devices) if cpu_affinity else None,
    )


__all__ = ["ChildSetup", "ChildSource", "child_base", "child_setup"]
