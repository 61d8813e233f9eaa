"""The plugin author's test kit: pytest fixtures, helpers and ``check_plugin``.

Installed with gpuscout as a pytest plugin (entry point ``pytest11``), so a plugin's own test
suite needs no import to use the fixtures::

    import my_backend
    from gpuscout.testing import check_plugin

    def test_my_backend_reports_the_recorded_card(gpuscout_scout, gpuscout_root):
        root = gpuscout_root({"/sys/class/acme/card0/memory": "8589934592\\n"})
        scout = gpuscout_scout(my_backend, root=root, env={"ACME_SDK": "fake"})
        assert [d.library for d in scout.discover().devices] == ["Acme"]

    def test_my_backend_is_well_behaved():
        assert check_plugin(my_backend, env={"ACME_SDK": "fake"}) == []

Fixtures are named ``gpuscout_*`` (pytest loads this plugin in every project that has gpuscout
installed), and this module imports only the standard library, pytest and what ``import
gpuscout`` loads anyway; anything dearer is imported when used.
"""

from __future__ import annotations

import os
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

import pytest

from gpuscout.context import U64_LIMIT
from gpuscout.markers import hookimpl
from gpuscout.sizes import GIB, KIB, MIB

if TYPE_CHECKING:
    from gpuscout.context import Context
    from gpuscout.records import DeviceInfo
    from gpuscout.scout import Scout

T = TypeVar("T")

#: What the kit's Scouts see by default besides their plugins' ``GPUSCOUT_TEST_ENV``: nothing
#: from this process.
DEFAULT_ENV: Mapping[str, str] = types.MappingProxyType({})
#: The attribute a plugin names the variables with under which it finds none of the real
#: machine's devices (the Vulkan plugin: a driver manifest that does not exist).
TEST_ENV_ATTRIBUTE = "GPUSCOUT_TEST_ENV"


def plugin_test_env(*plugins: Any) -> dict[str, str]:
    """The ``GPUSCOUT_TEST_ENV`` of each plugin (an object, a module or a built-in's name)
    merged in order: what keeps a kit's Scout from finding the real machine's devices."""
    from gpuscout.host import BUILTINS, normal_name

    modules = {normal_name(name): module for name, module in BUILTINS}
    env: dict[str, str] = {}
    for plugin in plugins:
        if isinstance(plugin, tuple) and len(plugin) == 2:
            plugin = plugin[1]
        if isinstance(plugin, str):
            module = modules.get(normal_name(plugin))
            if module is None:
                continue
            import importlib

            plugin = importlib.import_module(module)
        declared = getattr(plugin, TEST_ENV_ATTRIBUTE, None)
        if isinstance(declared, Mapping):
            env.update({k: v for k, v in declared.items() if isinstance(k, str) and isinstance(v, str)})
    return env


# -- recorded trees --------------------------------------------------------------------------------


class _Fifo:
    def __repr__(self) -> str:
        return "gpuscout.testing.FIFO"


FIFO = _Fifo()  #: A ``write_tree`` value that makes a FIFO (opening it for reading blocks).


class Symlink(NamedTuple):
    """A ``write_tree`` value that makes a symbolic link to ``target`` (kept as written)."""

    target: str


Content = str | bytes | Symlink | _Fifo


def write_tree(root: str | os.PathLike[str], files: Mapping[str, Content]) -> Path:
    """Write ``files`` under ``root`` and return ``root`` as a Path.

    Keys are absolute-looking paths (``"/sys/class/drm/card0/device/vendor"``) taken below
    ``root``; folders on the way are made. A str value is written as UTF-8 (lone surrogates
    kept, so any Hypothesis text fits), bytes as they are, ``FIFO`` makes a FIFO and
    ``Symlink(target)`` a symbolic link. Whatever stands at a path (a file, a FIFO, a link) is
    replaced, so a recorded tree can be spoiled one file at a time.
    """
    base = Path(root)
    for path, content in files.items():
        target = base / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        if isinstance(content, Symlink):
            target.symlink_to(content.target)
        elif isinstance(content, _Fifo):
            os.mkfifo(target)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        elif isinstance(content, str):
            target.write_text(content, encoding="utf-8", errors="surrogatepass")
        else:
            raise TypeError(
                f"write_tree: {path}: expected str, bytes, FIFO or Symlink, got {type(content).__name__}"
            )
    return base


def promptly(call: Callable[[], T], seconds: float = 10.0) -> T:
    """``call()`` run on a daemon thread: its answer (or its exception), or an AssertionError
    when it has not returned after ``seconds``, so a hang fails the test instead of the run."""
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:
            box.append((False, exc))

    thread = threading.Thread(target=run, name="gpuscout-promptly", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive() or not box:
        raise AssertionError(f"still running after {seconds} s")
    ok, value = box[0]
    if not ok:
        raise value
    result: T = value
    return result


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def processes_with_env(name: str, value: str) -> list[int]:
    """Running processes whose environment holds ``name=value`` (Linux ``/proc``): put a fresh
    value into the environment a plugin's children inherit, then check none is left."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def eventually(predicate: Callable[[], bool], within: float = 5.0) -> bool:
    """Whether ``predicate()`` holds at some point in the next ``within`` seconds."""
    end = time.monotonic() + within
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def in_u64(value: int | None) -> bool:
    """Whether ``value`` is None or a kernel counter could hold it (0..2**64-1): what a parser
    of sysfs or procfs text may answer, whatever the text."""
    return value is None or 0 <= value < U64_LIMIT


# -- in-process plugins ----------------------------------------------------------------------------


class InjectedDevices:
    """An in-process plugin that reports the devices it is handed (and answers no rule hook)."""

    def __init__(self, devices: Iterable[DeviceInfo] = ()) -> None:
        self.devices = list(devices)

    @hookimpl
    def gpuscout_enumerate(self, context: Context) -> list[DeviceInfo]:
        """The devices given, every time."""
        return list(self.devices)


def injected(devices: Iterable[DeviceInfo] = (), name: str = "injected") -> tuple[str, InjectedDevices]:
    """``(name, InjectedDevices(devices))``: a plugin for ``gpuscout_scout`` or ``Scout(extra=...)``."""
    return name, InjectedDevices(devices)


# -- Scouts ----------------------------------------------------------------------------------------


class ScoutFactory(Protocol):
    """What the ``gpuscout_scout`` fixture returns."""

    def __call__(
        self,
        *plugins: Any,
        env: Mapping[str, str] | None = None,
        platform: str | None = None,
        root: str | os.PathLike[str] | None = None,
        include_builtins: bool = False,
        **scout_options: Any,
    ) -> Scout: ...


class RootFactory(Protocol):
    """What the ``gpuscout_root`` fixture returns."""

    def __call__(
        self, files: Mapping[str, Content] | None = None, *, copy: str | os.PathLike[str] | None = None
    ) -> Path: ...


#: Scout arguments the kit decides itself: the Scout holds exactly the plugins given.
_FIXED = frozenset({"plugins", "extra", "entry_points"})


def _plugin_lists(
    plugins: Sequence[Any], include_builtins: bool, scout_options: Mapping[str, Any]
) -> tuple[list[str], list[tuple[str, Any]]]:
    """(allowed names, ``extra`` pairs) of the kit's Scouts: built-in names, plugin objects or
    modules, ``(name, plugin)`` pairs, and every built-in with ``include_builtins``."""
    from gpuscout.host import BUILTINS, normal_name

    fixed = sorted(_FIXED & scout_options.keys())
    if fixed:
        raise TypeError(f"{', '.join(fixed)}: the kit's Scout holds exactly the plugins passed")
    names: list[str] = [name for name, _ in BUILTINS] if include_builtins else []
    extra: list[tuple[str, Any]] = []
    for plugin in plugins:
        if isinstance(plugin, str):
            if normal_name(plugin) not in map(normal_name, names):
                names.append(plugin)
            continue
        if isinstance(plugin, tuple):
            if len(plugin) != 2 or not isinstance(plugin[0], str):
                raise TypeError(f"a plugin pair must be (name, plugin), got {plugin!r:.80}")
            name, obj = plugin
        else:
            name, obj = _plugin_name(plugin), plugin
        if normal_name(name) in map(normal_name, names):
            raise ValueError(f"two plugins named {name!r}: pass (name, plugin) pairs")
        names.append(name)
        extra.append((name, obj))
    return names, extra


def scout_of(
    *plugins: Any,
    env: Mapping[str, str] | None = None,
    platform: str = "linux",
    root: str | os.PathLike[str] = "/",
    include_builtins: bool = False,
    defaults: Mapping[str, str] = DEFAULT_ENV,
    **scout_options: Any,
) -> Scout:
    """A Scout that holds exactly ``plugins`` (the fixture-free ``gpuscout_scout``).

    Each plugin is a built-in's name (``"cuda"``), a plugin object or module (registered under
    its ``__name__``, or its class's name), or a ``(name, plugin)`` pair, in any mix and order;
    ``include_builtins`` adds every built-in. No entry point loads. ``env`` defaults to the
    plugins' ``plugin_test_env`` with ``defaults`` over it; ``scout_options`` go to Scout
    (``enumerate_timeout``, ``hook_timeout``, ``disable``).
    """
    from gpuscout.scout import Scout

    names, extra = _plugin_lists(plugins, include_builtins, scout_options)
    if env is None:
        env = {**plugin_test_env(*names, *(obj for _, obj in extra)), **defaults}
    return Scout(
        plugins=names,
        extra=extra,
        entry_points=False,
        env=dict(env),
        platform=platform,
        root=root,
        **scout_options,
    )


def isolated_scout(
    plugin: Any,
    name: str = "under_test",
    *,
    env: Mapping[str, str] | None = None,
    platform: str = "linux",
    root: str | os.PathLike[str] = "/",
    enumerate_timeout: float = 15.0,
) -> Scout:
    """A Scout holding ``plugin`` alone under ``name``: no built-in, no entry point, and only
    ``env`` (default empty) for environment."""
    return scout_of(
        (name, plugin), env=dict(env or {}), platform=platform, root=root, enumerate_timeout=enumerate_timeout
    )


def _plugin_name(plugin: Any) -> str:
    name = getattr(plugin, "__name__", None)
    return name if isinstance(name, str) else type(plugin).__name__


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
def gpuscout_env() -> dict[str, str]:
    """gpuscout: the environment ``gpuscout_scout``'s Scouts see unless given ``env=``.

    Empty: nothing from this process. The Scout adds, below these, each of its plugins'
    ``GPUSCOUT_TEST_ENV`` (the Vulkan plugin's points the real loader at a driver manifest that
    does not exist), so no real device answers. Override the fixture to change every test's
    default.
    """
    return dict(DEFAULT_ENV)


@pytest.fixture
def gpuscout_platform() -> str:
    """gpuscout: the ``sys.platform`` value ``gpuscout_scout``'s Scouts use ("linux")."""
    return "linux"


@pytest.fixture
def gpuscout_root(tmp_path: Path) -> RootFactory:
    """gpuscout: ``make(files=None, *, copy=None) -> Path``, a fresh folder under tmp_path to
    pass as ``root=``. ``copy`` (a recorded tree) is copied in first, then ``files``
    (``{"/proc/meminfo": "MemTotal: 8 kB\\n"}``, values as ``gpuscout.testing.write_tree``
    takes them: str, bytes, FIFO, Symlink) are written over it."""

    def make(
        files: Mapping[str, Content] | None = None, *, copy: str | os.PathLike[str] | None = None
    ) -> Path:
        import shutil
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="gpuscout-root-", dir=tmp_path))
        if copy is not None:
            shutil.copytree(copy, root, symlinks=True, dirs_exist_ok=True)
        return write_tree(root, files or {})

    return make


@pytest.fixture
def gpuscout_scout(gpuscout_env: dict[str, str], gpuscout_platform: str) -> ScoutFactory:
    """gpuscout: ``make(*plugins, env=None, platform=None, root=None, include_builtins=False,
    **scout_options) -> Scout`` holding exactly ``plugins``: built-in names ("cuda", "rocm",
    "metal", "vulkan"), plugin objects or modules, ``(name, plugin)`` pairs. No entry point
    loads; env defaults to the plugins' ``GPUSCOUT_TEST_ENV`` with ``gpuscout_env`` over it,
    platform to ``gpuscout_platform``, root to "/" (pass a ``gpuscout_root`` folder); options:
    enumerate_timeout, hook_timeout, disable."""

    def make(
        *plugins: Any,
        env: Mapping[str, str] | None = None,
        platform: str | None = None,
        root: str | os.PathLike[str] | None = None,
        include_builtins: bool = False,
        **scout_options: Any,
    ) -> Scout:
        return scout_of(
            *plugins,
            env=env,
            defaults=gpuscout_env,
            platform=gpuscout_platform if platform is None else platform,
            root="/" if root is None else root,
            include_builtins=include_builtins,
            **scout_options,
        )

    return make


class ReplayFactory(Protocol):
    """What the ``gpuscout_replay`` fixture returns."""

    def __call__(
        self,
        recording: str | os.PathLike[str],
        *plugins: Any,
        env: Mapping[str, str] | None = None,
        include_builtins: bool = True,
        **scout_options: Any,
    ) -> Scout: ...


def replay_scout(
    recording: str | os.PathLike[str],
    *plugins: Any,
    env: Mapping[str, str] | None = None,
    include_builtins: bool = True,
    **scout_options: Any,
) -> Scout:
    """A Scout that discovers on ``recording`` (a ``gpuscout record`` directory) with every
    built-in (unless ``include_builtins=False``) and ``plugins``; no entry point loads.

    The environment is the recording's unless ``env`` is given; the platform the recording's.
    Raises ``RecordingError`` for a malformed recording.
    """
    from gpuscout.scout import Scout

    names, extra = _plugin_lists(plugins, include_builtins, scout_options)
    return Scout(plugins=names, extra=extra, entry_points=False, env=env, replay=recording, **scout_options)


@pytest.fixture
def gpuscout_replay() -> ReplayFactory:
    """gpuscout: ``make(recording, *plugins, env=None, include_builtins=True, **scout_options)
    -> Scout`` discovering on a recorded machine (docs/recordings.md): its files, driver
    answers, platform and environment (``env`` replaces the latter). Plugins are built-in names
    or plugin objects, as for ``gpuscout_scout``; an object plugin reads its own answers from
    ``answers/<name>.json`` through ``context.recorded``."""
    return replay_scout


# -- the command line ------------------------------------------------------------------------------


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

    from gpuscout.host import BUILTINS

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
    import gpuscout.topology as topology

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
    devices: the built-ins' enumerate and refresh find nothing for the test.

    ``env`` (default ``gpuscout_env``) is all the Scout sees, and what ``exec`` hands its
    command; ``platform`` defaults to ``gpuscout_platform``; ``scout_options`` go to Scout.
    The command line's own Scout options (``--plugins``, ``--timeout``, ``--replay``) are not
    applied: the Scout is the kit's, or ``scout`` (a Scout, or a stand-in with its methods)
    when given. A ``SystemExit`` (``--help``, a usage error) gives its status as the code.
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
        if scout is None:
            if builtins:
                _hide_builtin_devices(monkeypatch)
            scout = scout_of(
                injected(devices),
                *plugins,
                include_builtins=builtins,
                env=dict(gpuscout_env if env is None else env),
                platform=gpuscout_platform if platform is None else platform,
                **scout_options,
            )
        capfd.readouterr()
        try:
            code = main(list(argv), scout_factory=lambda args: scout)
        except SystemExit as exc:  # --help and some usage errors exit instead of returning
            code = _exit_status(exc)
        out, err = capfd.readouterr()
        return CliRun(code, out, err)

    return run


# -- check_plugin ----------------------------------------------------------------------------------

#: Devices the rule hooks are asked about (the first ones a plugin reports).
_SAMPLE = 8
#: A library no plugin owns: what "not my device" guards must answer None for.
_FOREIGN = "gpuscout-check-foreign"


def check_plugin(
    plugin: Any,
    *,
    name: str = "under_test",
    env: Mapping[str, str] | None = None,
    platform: str = "linux",
    root: str | os.PathLike[str] = "/",
    enumerate_timeout: float = 15.0,
) -> list[str]:
    """Problems found with ``plugin`` (an empty list when there are none), each naming its hook
    or device.

    Without running it: every ``gpuscout_*`` attribute must be a hook of ``gpuscout.hookspecs``
    (a misspelling gets a "did you mean"), every hook function must carry ``hookimpl``, there
    must be at least one hook, and a declared ``GPUSCOUT_API_VERSION`` must be one this gpuscout
    speaks. Then, alone in a Scout (``env``, default empty; ``platform``; ``root``): enumerate
    must finish in time with a list of DeviceInfo, each with a library, no DeviceID twice, each
    surviving the wire format; a plugin that reports devices must answer
    ``gpuscout_visible_env``; and every rule hook it implements is asked about its own devices
    (the first eight) and must answer the hook's type, and None for a device of a library that
    is not its own.
    """
    problems, loadable = _static_problems(plugin)
    if not loadable:
        return problems
    from gpuscout.errors import GpuscoutError
    from gpuscout.results import PluginStatus

    try:
        scout = isolated_scout(
            plugin, name, env=env, platform=platform, root=root, enumerate_timeout=enumerate_timeout
        )
    except GpuscoutError as exc:
        return [*problems, f"cannot be loaded: {exc}"]
    found = scout.discover(include_software=True)
    report = found.report(name)
    if report.status is not PluginStatus.OK:
        problems.append(f"{report.status}: {report.error}")
    devices = [*found.devices, *(d.device for d in found.dropped)]
    problems += _record_problems(devices, report.hooks)
    return problems + _rule_problems(scout, name, report.hooks, devices)


def _static_problems(plugin: Any) -> tuple[list[str], bool]:
    """What reading ``plugin`` tells, and whether gpuscout would load it at all."""
    import difflib

    import pluggy

    from gpuscout.hookspecs import HOOKS
    from gpuscout.markers import PROJECT
    from gpuscout.plugin import API_VERSION_ATTRIBUTE, check_api_version

    problems: list[str] = []
    loadable = True
    refused = check_api_version(plugin)
    if refused:
        named = refused.startswith(API_VERSION_ATTRIBUTE)
        problems.append(refused if named else f"{API_VERSION_ATTRIBUTE}: {refused}")
        loadable = False
    hooks = sorted(HOOKS)
    manager = pluggy.PluginManager(PROJECT)
    implemented = 0
    try:
        attributes = sorted(a for a in dir(plugin) if a.startswith(f"{PROJECT}_"))
    except Exception as exc:
        return [*problems, f"cannot be inspected: {type(exc).__name__}: {exc}"], False
    for attr in attributes:
        try:
            marked = manager.parse_hookimpl_opts(plugin, attr) is not None
        except Exception as exc:
            problems.append(f"{attr}: cannot be inspected: {type(exc).__name__}: {exc}")
            continue
        if attr not in hooks:
            close = difflib.get_close_matches(attr, hooks, n=1)
            hint = f": did you mean {close[0]}?" if close else f" (the hooks: {', '.join(hooks)})"
            problems.append(f"{attr} is not a gpuscout hook{hint}")
            loadable = loadable and not marked  # gpuscout refuses a plugin with unknown hooks
        elif not marked:
            problems.append(f"{attr} is not decorated with gpuscout.hookimpl: pluggy never calls it")
        else:
            implemented += 1
    if not implemented:
        problems.append(
            "implements no gpuscout hook (functions named after a hook of "
            "gpuscout.hookspecs, decorated with gpuscout.hookimpl)"
        )
        loadable = False
    return problems, loadable


def _record_problems(devices: Sequence[DeviceInfo], hooks: Sequence[str]) -> list[str]:
    from collections import Counter

    from gpuscout.records import DeviceInfo
    from gpuscout.wire import from_json, to_json

    problems: list[str] = []
    for d in devices:
        if not d.library:
            problems.append(f"device {d.id!r} has no library")
        wire = d.evolve(runner_env_overrides={}, nvidia_driver_major=0)
        try:
            same: bool = from_json(to_json(wire), DeviceInfo) == wire
        except Exception as exc:
            problems.append(f"device {d.id!r} does not survive the wire format: {exc!s:.200}")
            continue
        if not same:
            problems.append(f"device {d.id!r} does not survive the wire format")
    for key, count in Counter(d.device_id for d in devices).items():
        if count > 1:
            problems.append(
                f"device {key.id!r} of library {key.library!r} is reported {count} "
                "times: a DeviceID (id, library) must name one device"
            )
    if devices and "gpuscout_visible_env" not in hooks:
        problems.append(
            "reports devices but does not implement gpuscout_visible_env: "
            "`gpuscout env` and `gpuscout exec` cannot select its devices"
        )
    return problems


def _rule_problems(scout: Scout, name: str, hooks: Sequence[str], devices: Sequence[DeviceInfo]) -> list[str]:
    """Ask each rule hook ``plugin`` implements about its own devices; what the Scout refused
    (and wrote into the plugin's report) comes back as problems."""
    from gpuscout.errors import GpuscoutError
    from gpuscout.hookspecs import HOOKS
    from gpuscout.records import DeviceInfo
    from gpuscout.results import PluginStatus

    report = next(r for r in scout.reports if r.name == name)
    problems: list[str] = []

    def ask(hook: str, about: str, call: Callable[[], object]) -> object:
        if hook not in hooks:
            return None
        before = report.error
        try:
            answer = call()
        except GpuscoutError as exc:
            problems.append(f"{hook} ({about}): {exc}")
            return None
        if report.error != before:
            added = report.error.removeprefix(before).removeprefix("; ")
            problems.append(f"{added} ({about})")
        return answer

    sample = list(devices[:_SAMPLE])
    for d in sample:
        about = f"device {d.id!r}"
        ask("gpuscout_flash_attention", about, partial(scout.flash_attention, d))
        ask("gpuscout_minimum_memory", about, partial(scout.minimum_memory, d))
        ask("gpuscout_validate_init", about, partial(scout.init_env, d))
        ask("gpuscout_duplicate_key", about, partial(scout.duplicate_keys, [d]))
        for other in sample:
            pair = f"devices {d.id!r} and {other.id!r}"
            ask("gpuscout_preferred_library", pair, partial(scout.preferred, d, other))
            ask("gpuscout_is_duplicate", pair, partial(scout.is_duplicate, d, other))
    if sample:
        about = f"devices {', '.join(repr(d.id) for d in sample)}"
        visible = ask("gpuscout_visible_env", about, partial(scout.visible_env, sample))
        chosen = visible if isinstance(visible, dict) else {}
        ask("gpuscout_isolate_env", about, partial(scout.isolate_env, sample, chosen))
        ask("gpuscout_refresh", about, partial(scout.refresh, sample))
    ask("gpuscout_isolate_env", "an empty selection", partial(scout.isolate_env, [], {}))
    if report.status is PluginStatus.TIMEOUT:
        return problems  # it overran once: asking again would only wait again
    # Per-device answers must leave other libraries' devices alone: a firstresult answer about
    # a device that is not the plugin's overrules the plugin that owns it.
    foreign = DeviceInfo(id="0", library=_FOREIGN)
    values: dict[str, Any] = {
        "device": foreign,
        "other": sample[0] if sample else foreign,
        "context": scout.context(name),
    }
    for hook, facts in HOOKS.items():
        if facts.declines_foreign and hook in hooks:
            kwargs = {arg: values[arg] for arg in facts.args}
            problems += _foreign_problems(scout, hook, kwargs)
    return problems


def _foreign_problems(scout: Scout, hook: str, kwargs: Mapping[str, Any]) -> list[str]:
    """The plugin's own answer (it is the Scout's only plugin) about a foreign device."""
    caller = getattr(scout.plugin_manager.hook, hook)
    try:
        answer = promptly(lambda: caller(**kwargs), seconds=scout.hook_timeout)
    except AssertionError:
        return [
            f"{hook} did not answer within {scout.hook_timeout:g} s about a device of library {_FOREIGN!r}"
        ]
    except Exception as exc:
        return [
            f"{hook} raised {type(exc).__name__}: {exc!s:.200} about a device of library "
            f"{_FOREIGN!r}, which is not its own"
        ]
    if answer is None or answer == []:
        return []
    return [
        f"{hook} answers {answer!r:.80} about a device of library {_FOREIGN!r}, which is "
        "not its own: answer None for other libraries' devices "
        "(gpuscout.plugin.for_library does that)"
    ]


__all__ = [
    "DEFAULT_ENV",
    "FIFO",
    "GIB",
    "KIB",
    "MIB",
    "TEST_ENV_ATTRIBUTE",
    "CliRun",
    "CliRunner",
    "Content",
    "InjectedDevices",
    "ReplayFactory",
    "RootFactory",
    "ScoutFactory",
    "Symlink",
    "check_plugin",
    "gpuscout_cli",
    "gpuscout_env",
    "gpuscout_platform",
    "gpuscout_replay",
    "gpuscout_root",
    "gpuscout_scout",
    "hide_live_topology",
    "in_u64",
    "injected",
    "isolated_scout",
    "plugin_test_env",
    "promptly",
    "replay_scout",
    "scout_of",
    "write_tree",
]
