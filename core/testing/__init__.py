"""The plugin author's test kit: pytest fixtures, helpers and ``check_plugin``.

A pytest plugin that a project opts into, as tox's ``tox.pytest`` is: ``-p gpuscout.testing``
in its pytest ``addopts``, or ``pytest_plugins = ["gpuscout.testing"]`` in its top-level
``conftest.py``. It has no ``pytest11`` entry point, because an autoloaded kit would import
gpuscout into the test run of every project that merely has gpuscout installed. Once enabled, a
plugin's own test suite needs no import to use the fixtures::

    import my_backend
    from gpuscout.testing import check_plugin

    def test_my_backend_reports_the_recorded_card(gpuscout_scout, gpuscout_root):
        root = gpuscout_root({"/sys/class/acme/card0/memory": "8589934592\\n"})
        scout = gpuscout_scout(my_backend, root=root, env={"ACME_SDK": "fake"})
        assert [d.library for d in scout.discover().devices] == ["Acme"]

    def test_my_backend_is_well_behaved():
        assert check_plugin(my_backend, env={"ACME_SDK": "fake"}) == []

Fixtures are named ``gpuscout_*`` (they share a project's fixture namespace), and this module
imports only the standard library, pytest and what ``import gpuscout`` loads anyway; anything
dearer is imported when used.

The kit's pieces live beside this module, each re-exported here: recorded trees
(``testing_trees``), bounded waits (``testing_waits``), Scouts and injected devices
(``testing_scouts``), the command line (``testing_cli``) and ``check_plugin``
(``testing_check``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from gpuscout.sizes import GIB, KIB, MIB
from gpuscout.testing._check import check_plugin
from gpuscout.testing._cli import CliRun, CliRunner, gpuscout_cli, hide_live_topology
from gpuscout.testing._scouts import (
    DEFAULT_ENV,
    TEST_ENV_ATTRIBUTE,
    InjectedDevices,
    injected,
    isolated_scout,
    plugin_test_env,
    replay_scout,
    scout_of,
)
from gpuscout.testing._trees import FIFO, Content, Symlink, in_u64, write_tree
from gpuscout.testing._waits import eventually, processes_with_env, promptly, running

if TYPE_CHECKING:
    from gpuscout.scout import Scout

# -- fixtures --------------------------------------------------------------------------------------


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


@pytest.fixture
def gpuscout_replay() -> ReplayFactory:
    """gpuscout: ``make(recording, *plugins, env=None, include_builtins=True, **scout_options)
    -> Scout`` discovering on a recorded machine (docs/recordings.md): its files, driver
    answers, platform and environment (``env`` replaces the latter). Plugins are built-in names
    or plugin objects, as for ``gpuscout_scout``; an object plugin reads its own answers from
    ``answers/<name>.json`` through ``context.recorded``."""
    return replay_scout


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
    "eventually",
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
    "processes_with_env",
    "promptly",
    "replay_scout",
    "running",
    "scout_of",
    "write_tree",
]
