"""The command line under the plugin author's kit (``gpuscout.testing``): the ``gpuscout_cli``
fixture, what one run gives (``CliRun``), and ``hide_live_topology``, which keeps this machine's
devices out of a test."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import pytest

from gpuscout._host.markers import hookimpl
from gpuscout.testing._scouts import injected, scout_of

if TYPE_CHECKING:
    from gpuscout._machine.context import Context
    from gpuscout._records.device import DeviceInfo


class CliRun(NamedTuple):
    """What one ``gpuscout`` command run in-process did: its exit code, stdout and stderr."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout read as one JSON document (``--json``, ``env --format json``)."""
        import json

        return json.loads(self.out)


class CliRunner(Protocol):
    """What the ``gpuscout_cli`` fixture returns."""

    def __call__(
        self,
        argv: Sequence[str],
        devices: Iterable[DeviceInfo] = (),
        *,
        env: Mapping[str, str] | None = None,
        plugins: Sequence[Any] = (),
        builtins: bool = True,
        platform: str | None = None,
        scout: Any = None,
        **scout_options: Any,
    ) -> CliRun: ...


@hookimpl
def _finds_nothing(context: Context) -> list[DeviceInfo]:
    """A built-in's enumerate under ``gpuscout_cli``: none of this machine's devices."""
    context.note("this machine's devices are hidden from the test (gpuscout.testing gpuscout_cli)")
    return []


@hookimpl
def _refreshes_nothing(devices: Sequence[DeviceInfo], context: Context) -> None:
    """A built-in's refresh under ``gpuscout_cli``: no driver is asked (the devices go stale)."""
    return None


def _hide_builtin_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give every built-in an enumerate that finds nothing and a refresh that answers nothing,
    for this test: their rule hooks (visibility variables, duplicates, flash attention) still
    answer, and no driver, file or loader of this machine is asked. Only this process: a child
    (``exec``'s command, ``--isolated``, ``--verify``) sees the machine as it is."""
    import importlib

    from gpuscout._host.names import BUILTINS

    hide_live_topology(monkeypatch)
    for _, module_name in BUILTINS:
        module = importlib.import_module(module_name)
        for hook, stand_in in (
            ("gpuscout_enumerate", _finds_nothing),
            ("gpuscout_refresh", _refreshes_nothing),
        ):
            if hasattr(module, hook):
                monkeypatch.setattr(module, hook, stand_in)


def hide_live_topology(monkeypatch: pytest.MonkeyPatch) -> None:
    """For this test, the core reads no device placement (NUMA node, CPUs, PCIe link) from this
    machine's own ``/sys``: a device a test hands over with a PCI address that happens to exist
    here keeps its topology unknown. A recorded root or a replay is still read."""
    import gpuscout._machine.topology as topology

    real = topology.read_placement

    def read_placement(context: Context, address: str) -> topology.Placement:
        return topology.Placement() if context.root in ("", "/") else real(context, address)

    monkeypatch.setattr(topology, "read_placement", read_placement)


def _exit_status(exc: SystemExit) -> int:
    """The status a process ending with ``exc`` has, as the interpreter sets it (a message
    instead of a number: printed on stderr, status 1)."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    import sys

    print(exc.code, file=sys.stderr)
    return 1


@pytest.fixture
def gpuscout_cli(
    gpuscout_env: dict[str, str],
    gpuscout_platform: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> CliRunner:
    """gpuscout: ``run(argv, devices=(), *, env=None, plugins=(), builtins=True, platform=None,
    scout=None, **scout_options) -> CliRun(code, out, err)``: ``gpuscout ARGV`` run in-process
    (``gpuscout.cli.main``) over a Scout that reports exactly ``devices`` (and what ``plugins``
    find), with every built-in's rules (``builtins=False``: none) but none of this machine's
    devices: the built-ins' enumerate and refresh find nothing for the test, and the core reads
    no device placement from this machine's ``/sys`` (``hide_live_topology``).

    ``env`` (default ``gpuscout_env``) is all the Scout sees, and what ``exec`` hands its
    command; ``platform`` defaults to ``gpuscout_platform``; ``scout_options`` go to Scout.
    The command line's own Scout options (``--plugins``, ``--timeout``, ``--replay``) are not
    applied: the Scout is the kit's, or ``scout`` (a Scout, or a stand-in with its methods)
    when given. The budget options (``--reserve``, ``--cap``, ``--prefer``: policy, not the
    machine) are, to the kit's Scout, unless ``scout_options`` holds the same keyword. A
    ``SystemExit`` (``--help``, a usage error) gives its status as the code.
    stdout and stderr are captured at the file descriptors (``capfd``, so a test
    using it takes no ``capsys``), ``exec``'s command's output included; output printed before
    the run is dropped.
    """
    from gpuscout.cli import main

    def run(
        argv: Sequence[str],
        devices: Iterable[DeviceInfo] = (),
        *,
        env: Mapping[str, str] | None = None,
        plugins: Sequence[Any] = (),
        builtins: bool = True,
        platform: str | None = None,
        scout: Any = None,
        **scout_options: Any,
    ) -> CliRun:
        if isinstance(argv, str):
            raise TypeError(f"argv must be a list of arguments, got the str {argv!r:.80}")
        given = scout

        def factory(args: Any) -> Any:
            if given is not None:
                return given
            from gpuscout.cli._budget_options import budget_options

            return scout_of(
                injected(devices),
                *plugins,
                include_builtins=builtins,
                env=dict(gpuscout_env if env is None else env),
                platform=gpuscout_platform if platform is None else platform,
                **{**budget_options(args), **scout_options},
            )

        if scout is None and builtins:
            _hide_builtin_devices(monkeypatch)
        capfd.readouterr()
        try:
            code = main(list(argv), scout_factory=factory)
        except SystemExit as exc:  # --help and some usage errors exit instead of returning
            code = _exit_status(exc)
        out, err = capfd.readouterr()
        return CliRun(code, out, err)

    return run
