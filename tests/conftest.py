"""Shared fixtures: Scouts over injected devices (through the gpuscout.testing kit), installed
distributions with entry points, lavapipe; the fake machine (``--fake-machine`` or
``GPUSCOUT_TEST_FAKE_MACHINE``) and the markers that say what a test needs of the real one."""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.util
import os
import platform
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, is_hypothesis_test, settings

from gpuscout import DeviceInfo, Scout
from gpuscout import log as gpuscout_log
from gpuscout.testing import ScoutFactory, hide_live_topology, injected, plugin_test_env
from tests import ports

# Keeps the real Vulkan loader from finding lavapipe where a test injects its own devices.
NO_VULKAN_ENV = plugin_test_env("vulkan")


def _import_every_module_now() -> None:
    """Import every gpuscout module in the main thread, at start-up.

    This suite loads the kit as a pytest plugin (``-p gpuscout.testing`` in pyproject's addopts),
    so pytest rewrites the asserts of the kit's modules as they are imported. A plugin's
    enumerate runs in a host thread and imports its modules lazily; on CPython 3.11.7, once a
    Hypothesis test has changed the recursion limit, compiling a rewritten module on such a
    thread fails with "SystemError: AST constructor recursion depth mismatch" and the plugin
    fails. Imported here first, a module is only looked up later. (Tests of what a run imports
    start fresh interpreters.)
    """
    import pkgutil

    import gpuscout

    for info in pkgutil.walk_packages(gpuscout.__path__, "gpuscout."):
        if not info.name.endswith("__main__"):  # running it would start the command line
            try:
                importlib.import_module(info.name)
            except ImportError:  # an optional dependency missing here
                pass


_import_every_module_now()


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Any:
    """Each test starts and ends with structlog unconfigured and no CLI logging wish."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
    gpuscout_log.reset_for_tests()


@pytest.fixture
def scout_with(gpuscout_scout: ScoutFactory, hidden_machine: None) -> Callable[..., Scout]:
    """Build a Scout holding the built-in rule plugins plus injected devices, and none of this
    machine's real devices (``hidden_machine``), whatever ``env`` says."""

    def make(
        devices: Sequence[DeviceInfo] = (),
        *,
        builtins: Sequence[str] = ("cuda", "rocm", "metal", "vulkan"),
        env: dict[str, str] | None = None,
        platform: str = "linux",
        **kwargs: Any,
    ) -> Scout:
        # Vulkan's test env only: hidden_machine hides the others' devices, and the env is
        # also what `gpuscout exec` hands its child, where a test looks at every variable.
        return gpuscout_scout(
            *builtins, injected(devices), env={**NO_VULKAN_ENV, **(env or {})}, platform=platform, **kwargs
        )

    return make


def write_site(
    root: Path, distribution: str, version: str, modules: dict[str, str], entry_points: dict[str, str]
) -> Path:
    """A folder that is a real install of ``distribution``: dist-info with gpuscout entry points
    (name -> module) and the modules' sources. Put it on PYTHONPATH or sys.path."""
    dist = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (dist / "entry_points.txt").write_text(
        "[gpuscout]\n" + "".join(f"{n} = {m}\n" for n, m in entry_points.items())
    )
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source))
    return root


@pytest.fixture(scope="session")
def site_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """Build installed-distribution folders with ``write_site``."""

    def make(distribution: str, version: str, modules: dict[str, str], entry_points: dict[str, str]) -> Path:
        return write_site(tmp_path_factory.mktemp("site"), distribution, version, modules, entry_points)

    return make


@pytest.fixture
def machine(scout_with: Callable[..., Scout]) -> Callable[..., Callable[[Any], Scout]]:
    """``machine(devices, env)``: a Scout factory for ``gpuscout.cli.main(argv, scout_factory=...)``
    whose Scout reports ``devices`` under ``env`` (the command line's scout options are ignored)
    and none of this machine's real devices (see ``scout_with``)."""

    def factory(devices: Sequence[DeviceInfo], env: dict[str, str] | None = None) -> Callable[[Any], Scout]:
        return lambda args: scout_with(devices, env=env)

    return factory


#: Where Debian installs Vulkan driver manifests (lavapipe: mesa-vulkan-drivers).
ICD_FOLDER = "/usr/share/vulkan/icd.d"


def on_ci() -> bool:
    """Whether this run is CI's (.ci/run exports CI=true): there, what a test needs of the
    machine must be there, and a skip for its absence is a failure (``pytest_runtest_makereport``)."""
    return os.environ.get("CI") == "true"


def require(what: str) -> None:
    """Skip without ``what``, but fail under CI, where .ci/run must have installed it."""
    if on_ci():
        pytest.fail(
            f"{what} is missing, but CI must provide it (.ci/run installs mesa-vulkan-drivers libvulkan1)"
        )
    pytest.skip(f"{what} is missing")


def find_lavapipe() -> tuple[str, str]:
    """(the lavapipe ICD manifest of this machine's architecture, "") when it and the Vulkan
    loader are here, else ("", what is missing)."""
    found = sorted(glob.glob(os.path.join(ICD_FOLDER, "lvp_icd.*.json")))
    mine = [p for p in found if platform.machine() in os.path.basename(p)]
    if not (mine or found):
        return "", f"lavapipe ({ICD_FOLDER}/lvp_icd.*.json)"
    try:
        ctypes.CDLL("libvulkan.so.1")
    except OSError:
        return "", "the Vulkan loader (libvulkan.so.1)"
    return (mine or found)[0], ""


@pytest.fixture(scope="session")
def lavapipe_icd() -> str:
    """The lavapipe ICD manifest of this machine's architecture; the loader must load too."""
    icd, missing = find_lavapipe()
    if missing:
        require(missing)
    return icd


@pytest.fixture
def lavapipe_env(lavapipe_icd: str) -> dict[str, str]:
    """This process's environment with the loader pinned to lavapipe alone."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GGML_VK_VISIBLE_DEVICES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES")
    }
    env["VK_DRIVER_FILES"] = lavapipe_icd
    return env


#: Sets SIGINT to its default action, then execs its arguments (the pid stays the same).
SIGINT_LAUNCHER = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def with_default_sigint(argv: Sequence[str]) -> list[str]:
    """``argv`` (its program an absolute path) run so that it starts with SIGINT at its default
    action, for a test that sends it Ctrl-C: a shell starts a background job (``pytest ... &``)
    with SIGINT ignored, children inherit that, and a Python started so installs no
    KeyboardInterrupt handler. (Popen's ``restore_signals`` resets SIGPIPE and SIGXFSZ only.)"""
    return [sys.executable, "-c", SIGINT_LAUNCHER, *argv]


#: The variable whose fresh value marks every process a test starts (see ``env``).
MARKER = "GPUSCOUT_TEST_CHILD"


@pytest.fixture
def env() -> Iterator[dict[str, str]]:
    """This process's environment plus a fresh ``GPUSCOUT_TEST_CHILD`` value for children: the
    test fails when any process carrying it is still running a few seconds after it ends."""
    from gpuscout.testing import eventually, processes_with_env

    marker = uuid.uuid4().hex
    yield {**os.environ, MARKER: marker}
    assert eventually(lambda: not processes_with_env(MARKER, marker)), (
        f"processes left running: {processes_with_env(MARKER, marker)}"
    )


# -- the machine: fake, hidden, or needed as it is --------------------------------------------------
#
# Every test must give the same result on a machine with any GPU, driver or none. Three tools:
#
# - ``--fake-machine=h200`` (or GPUSCOUT_TEST_FAKE_MACHINE=h200) runs the whole suite as if this
#   machine had that hardware: the real CUDA plugin's NVML seam (``nvml._load_nvml``) answers
#   with a recording of tests/plugins/cuda/recorded/, and the real ROCm plugin reads a tree of
#   tests/plugins/rocm/trees/ wherever it would read the live root. Names combine with commas
#   (``h200,rx7900xtx``). Only this process is faked: a child process sees the real machine.
# - ``hidden_machine``: the built-in plugins find none of the machine's devices, real or fake,
#   whatever env a test gives (a test's own ``CUDA_VISIBLE_DEVICES=0`` must not unhide the
#   machine's GPU 0). Every test outside tests/plugins/ gets it unless marked ``real_machine``;
#   ``scout_with`` and ``machine`` always do. Vendor tests fake their own plugin's seam.
# - markers ``needs_no_nvidia_driver`` / ``needs_no_amd_gpu``: tests about the real "no driver"
#   path, skipped with the reason on a machine (or fake machine) that has one.
#
# Under CI=true a skip is a failure (CI's machine is specified by .ci/run: lavapipe, dash, no
# GPU driver), except a skip declared by a skip/skipif mark, one caused by the fake machine,
# and a test marked ``ci_may_skip``.

#: The variable that switches the fake machine on (the command line option wins).
FAKE_MACHINE_ENV = "GPUSCOUT_TEST_FAKE_MACHINE"
TESTS = Path(__file__).parent
CUDA_RECORDINGS = TESTS / "plugins" / "cuda" / "recorded"
ROCM_TREES = TESTS / "plugins" / "rocm" / "trees"
#: Where the ROCm plugin finds AMD GPUs on a live root (besides amdsmi).
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
NVML_LIBRARY = "libnvidia-ml.so.1"

#: The markers this file gives meaning to, with what each test needs.
MARKERS = {
    "needs_no_nvidia_driver": f"a machine without an NVIDIA driver ({NVML_LIBRARY})",
    "needs_no_amd_gpu": f"a machine without amdsmi and without an AMD KFD topology ({KFD_NODES})",
}

#: Tests of vendor files (owned there) that need the machine without a driver, by node id.
#: TODO(vendor owners): move each into its file as a mark, then empty this table.
_NO_DRIVER = "tests/plugins/cuda/test_cuda_no_driver.py::"
_AMDSMI = "tests/plugins/rocm/test_amdsmi_source.py::"
VENDOR_MARKS = {
    _NO_DRIVER + "test_missing_driver_gives_no_devices_and_an_ok_report": "needs_no_nvidia_driver",
    _NO_DRIVER + "test_missing_driver_path_does_not_import_pynvml": "needs_no_nvidia_driver",
    _NO_DRIVER + "test_pynvml_itself_reports_library_not_found_here": "needs_no_nvidia_driver",
    _NO_DRIVER + "test_enumeration_without_a_driver_is_fast": "needs_no_nvidia_driver",
    _AMDSMI + "test_amdsmi_alone_builds_the_record_when_kfd_is_unreadable": "needs_no_amd_gpu",
    _AMDSMI + "test_amdsmi_gpus_without_dev_kfd_give_no_device_and_say_why": "needs_no_amd_gpu",
    _AMDSMI + "test_amdsmi_failure_falls_back_to_sysfs": "needs_no_amd_gpu",
    _AMDSMI + "test_live_root_without_amdsmi_falls_back_to_sysfs_and_names_amdsmi": "needs_no_amd_gpu",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fake-machine",
        default=os.environ.get(FAKE_MACHINE_ENV, ""),
        metavar="NAMES",
        help="run as if this machine had the recorded hardware: CUDA recordings "
        f"({', '.join(sorted(p.stem for p in CUDA_RECORDINGS.glob('*.json')))}) and ROCm "
        f"trees ({', '.join(sorted(p.name for p in ROCM_TREES.iterdir() if p.is_dir()))}), "
        f"comma separated (default: ${FAKE_MACHINE_ENV})",
    )


def fake_machine_names(config: pytest.Config) -> list[str]:
    """The recordings and trees the fake machine is made of ([] when it is off)."""
    value = str(config.getoption("--fake-machine") or "")
    names = [n.strip() for n in value.split(",") if n.strip()]
    for name in names:
        if not ((CUDA_RECORDINGS / f"{name}.json").is_file() or (ROCM_TREES / name).is_dir()):
            raise pytest.UsageError(
                f"--fake-machine / {FAKE_MACHINE_ENV}: {name!r} is neither a CUDA recording in "
                f"{CUDA_RECORDINGS} nor a ROCm tree in {ROCM_TREES}"
            )
    return names


def _fake_cuda_names(config: pytest.Config) -> list[str]:
    return [n for n in fake_machine_names(config) if (CUDA_RECORDINGS / f"{n}.json").is_file()]


def _fake_rocm_names(config: pytest.Config) -> list[str]:
    return [n for n in fake_machine_names(config) if (ROCM_TREES / n).is_dir()]


def pytest_configure(config: pytest.Config) -> None:
    fake_machine_names(config)  # a misspelt name stops the run before any test


def pytest_report_header(config: pytest.Config) -> str | None:
    names = fake_machine_names(config)
    return f"gpuscout fake machine: {', '.join(names)}" if names else None


# -- Hypothesis: each property test's own example count under CI=true, at most DEV_EXAMPLES else --
#: Outside CI a property test runs at most this many examples (CI runs each test's own count).
DEV_EXAMPLES = 40
# No deadline and no too-slow check, as in CI: a loaded laptop must not fail a property test
# that is merely slow (a timing is a benchmark's business, not a test's).
settings.register_profile(
    "gpuscout-dev", max_examples=DEV_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# "ci" is Hypothesis's own profile (derandomized, no deadline, no too-slow check), loaded already
# where CI is set.
settings.load_profile("ci" if on_ci() else "gpuscout-dev")


def _cap_examples(item: pytest.Item) -> None:
    """Outside CI, lower an explicit ``@settings(max_examples=N)`` above DEV_EXAMPLES, which a
    profile cannot: Hypothesis keeps the decorator's settings on the test (it has no public
    setter, hence the attribute), and a test's count outranks the profile's."""
    test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
    if on_ci() or test is None or not is_hypothesis_test(test):
        return
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if isinstance(own, settings) and own.max_examples > DEV_EXAMPLES:
        test._hypothesis_internal_use_settings = settings(own, max_examples=DEV_EXAMPLES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rootdir = Path(str(config.rootpath))
    for item in items:
        _cap_examples(item)
        path = Path(str(item.path))
        relative = path.relative_to(rootdir).as_posix() if path.is_relative_to(rootdir) else ""
        marker = VENDOR_MARKS.get(f"{relative}::{item.name.split('[')[0]}")
        if marker:
            item.add_marker(marker)


@functools.cache
def _cuda_fakes() -> Any:
    """tests/plugins/cuda/conftest.py as a module (its FakeNvmlRecorded), loaded by path: with
    --import-mode=importlib no test folder is importable by name."""
    spec = importlib.util.spec_from_file_location(
        "gpuscout_tests_cuda_fakes", TESTS / "plugins" / "cuda" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_nvml(names: Sequence[str]) -> Any:
    """A FakeNvmlRecorded holding the GPUs of the CUDA recordings ``names``, in order."""
    fakes = _cuda_fakes()
    merged = fakes.load_recording(names[0])
    for name in names[1:]:
        merged["gpus"] += fakes.load_recording(name)["gpus"]
    return fakes.FakeNvmlRecorded(merged)


def _live_root_read_as(original: Callable[[Any], Any], tree: Path) -> Callable[[Any], Any]:
    """``original`` (the ROCm plugin's enumerate) with the live root replaced by ``tree``."""
    import attrs

    def enumerate_devices(context: Any) -> Any:
        if context.root in ("", "/"):
            context = attrs.evolve(context, root=str(tree))  # notes: the same list
        return original(context)

    return enumerate_devices


def _machine_as(
    monkeypatch: pytest.MonkeyPatch, nvml_answer: Callable[[Any], Any] | None, rocm_tree: Path | None
) -> None:
    """Point the built-ins' seams at another machine: NVML answers ``nvml_answer(context)``
    (off macOS, where the plugin never looks), the live root reads as ``rocm_tree``."""
    if nvml_answer is not None:
        from gpuscout.plugins.cuda import enumeration as nvml

        real = nvml._load_nvml
        # A replay asks no driver: its recorded answers are hermetic already.
        monkeypatch.setattr(
            nvml,
            "_load_nvml",
            lambda context: (
                real(context) if context.platform == "darwin" or context.replaying else nvml_answer(context)
            ),
        )
    if rocm_tree is not None:
        from gpuscout.plugins.rocm import enumeration as discover

        monkeypatch.setattr(
            discover, "enumerate_devices", _live_root_read_as(discover.enumerate_devices, rocm_tree)
        )


def _no_driver(context: Any) -> None:
    context.note(
        "no NVIDIA driver: this machine's GPUs are hidden from the test (tests/conftest.py hidden_machine)"
    )
    return None


@pytest.fixture
def hidden_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, _fake_machine: None
) -> None:
    """The built-in CUDA and ROCm plugins find no device of this machine, real or fake: NVML
    is "not installed" and the live root has no /sys (whatever env the Scout is given). Vulkan
    is kept off real drivers by its ``GPUSCOUT_TEST_ENV``, Metal by ``platform="linux"``. The
    core reads no device placement from the live ``/sys`` either (``hide_live_topology``)."""
    hide_live_topology(monkeypatch)
    _machine_as(monkeypatch, _no_driver, tmp_path_factory.mktemp("empty-root"))


@pytest.fixture(autouse=True)
def _fake_machine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``--fake-machine``: the built-in plugins find the recorded hardware on the live
    root. A test's own fakes (``fake_nvml``, a recorded root) are installed later and win."""
    cuda, rocm = _fake_cuda_names(request.config), _fake_rocm_names(request.config)
    if cuda or rocm:
        nv = fake_nvml(cuda) if cuda else None
        _machine_as(
            monkeypatch,
            (lambda context: nv) if nv is not None else None,
            ROCM_TREES / rocm[0] if rocm else None,
        )


@pytest.fixture(autouse=True)
def _hermetic(request: pytest.FixtureRequest, _fake_machine: None) -> None:
    """Tests outside tests/plugins/ never see this machine's devices unless marked
    ``real_machine`` (they would pass or fail by the hardware)."""
    inside_plugins = (TESTS / "plugins") in Path(str(request.node.path)).parents
    if not inside_plugins and request.node.get_closest_marker("real_machine") is None:
        request.getfixturevalue("hidden_machine")


@pytest.fixture(scope="session")
def _worker_ports() -> Callable[[], int]:
    return ports.allocator()


@pytest.fixture(autouse=True)
def _own_ports(monkeypatch: pytest.MonkeyPatch, _worker_ports: Callable[[], int]) -> None:
    """Custom ``{port}`` runners get ports no other xdist worker is handed (tests/ports.py);
    ``gpuscout.runner.free_port`` stays the real one."""
    monkeypatch.setattr("gpuscout.runner._client.free_port", _worker_ports)


@pytest.fixture(autouse=True)
def _no_live_topology(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The core reads no device placement from this machine's /sys in any test (plugin tests
    with fake drivers included) unless it is marked ``real_machine``: a fake GPU's PCI address
    may be a real device here."""
    if request.node.get_closest_marker("real_machine") is None:
        hide_live_topology(monkeypatch)


def nvidia_driver_here(config: pytest.Config) -> str:
    """Why this machine counts as having an NVIDIA driver ("" when it has none)."""
    if _fake_cuda_names(config):
        return f"the fake machine ({', '.join(_fake_cuda_names(config))}) has one"
    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return ""
    return f"{NVML_LIBRARY} loads here"


def amd_gpu_here(config: pytest.Config) -> str:
    """Why this machine counts as having an AMD GPU or amdsmi ("" when it has neither)."""
    if _fake_rocm_names(config):
        return f"the fake machine ({', '.join(_fake_rocm_names(config))}) has one"
    if os.path.isdir(KFD_NODES):
        return f"{KFD_NODES} exists here"
    if importlib.util.find_spec("amdsmi") is not None:
        return "amdsmi is installed here"
    return ""


FAKE_CAUSED = pytest.StashKey[bool]()


def pytest_runtest_setup(item: pytest.Item) -> None:
    checks = {"needs_no_nvidia_driver": nvidia_driver_here, "needs_no_amd_gpu": amd_gpu_here}
    for name, check in checks.items():
        if item.get_closest_marker(name) is None:
            continue
        why = check(item.config)
        if why:
            item.stash[FAKE_CAUSED] = why.startswith("the fake machine")
            pytest.skip(f"needs {MARKERS[name]}; {why}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Under CI=true a skip is a failure: CI's machine must have what a test needs."""
    report = yield
    if not (report.skipped and on_ci()) or hasattr(report, "wasxfail"):
        return report
    reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    declared = {
        str(m.kwargs.get("reason", m.args[0] if m.name == "skip" and m.args else ""))
        for m in item.iter_markers()
        if m.name in ("skip", "skipif")
    }
    if (
        item.stash.get(FAKE_CAUSED, False)
        or item.get_closest_marker("ci_may_skip")
        or reason.removeprefix("Skipped: ") in declared
    ):
        return report
    report.outcome = "failed"
    report.longrepr = f"skipped under CI=true, where the machine must provide what the test needs: {reason}"
    return report
