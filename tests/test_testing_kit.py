"""The plugin authors' test kit (gpuscout.testing): fixtures, helpers and check_plugin."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import pytest

import gpuscout.plugins.cuda
import gpuscout.plugins.metal
import gpuscout.plugins.rocm
import gpuscout.plugins.vulkan
from gpuscout import DeviceInfo, EnvEntry, hookimpl
from gpuscout.sizes import GIB
from gpuscout.testing import (
    DEFAULT_ENV,
    FIFO,
    CliRunner,
    InjectedDevices,
    RootFactory,
    ScoutFactory,
    Symlink,
    check_plugin,
    in_u64,
    injected,
    isolated_scout,
    plugin_test_env,
    promptly,
    scout_of,
    write_tree,
)

pytest_plugins = ["pytester"]

TREES = Path(__file__).parent / "plugins" / "rocm" / "trees"
FIXTURES = ("gpuscout_cli", "gpuscout_env", "gpuscout_platform", "gpuscout_root", "gpuscout_scout")


class Card:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        free = int(context.env.get("FREE", "4"))
        return [DeviceInfo(id="0", library="Mine", total_memory=8, free_memory=free)]

    @hookimpl
    def gpuscout_visible_env(self, selection: Any, context: Any) -> list[EnvEntry]:
        return [EnvEntry(i, "MINE_VISIBLE", d.id) for i, d in enumerate(selection) if d.library == "Mine"]


class NoLibrary(Card):
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return [DeviceInfo(id="0")]


def test_isolated_scout_holds_only_the_plugin_and_its_env() -> None:
    """Only the plugin under test loads, and it sees only the env it is given."""
    scout = isolated_scout(Card(), env={"FREE": "6"})
    assert [r.name for r in scout.reports if r.status != "disabled"] == ["under_test"]
    assert [d.free_memory for d in scout.discover().devices] == [6]


# -- the pytest plugin -----------------------------------------------------------------------------


def _pytest_in(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``pytest --fixtures`` in ``folder`` (a project of its own), plugin autoload left on."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider", *options],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _fixtures_listed(out: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.split()[0] for line in out.stdout.splitlines() if line[:1].isalpha()}


def test_the_distribution_declares_no_pytest11_entry_point() -> None:
    """The installed gpuscout has no pytest11 entry point: pytest does not autoload the kit."""
    from importlib.metadata import distribution

    groups = {ep.group for ep in distribution("gpuscout").entry_points}
    assert "pytest11" not in groups, groups


def test_a_project_that_does_not_opt_in_never_imports_gpuscout(tmp_path: Path) -> None:
    """A pytest run in a project without ``-p gpuscout.testing`` neither imports gpuscout nor
    offers the kit's fixtures."""
    (tmp_path / "conftest.py").write_text(
        "import sys\n\ndef pytest_sessionfinish():\n"
        "    print('gpuscout imported:', any(m.split('.')[0] == 'gpuscout' for m in sys.modules))\n"
    )
    out = _pytest_in(tmp_path)
    assert "gpuscout imported: False" in out.stdout, out.stdout + out.stderr
    assert not set(FIXTURES) & _fixtures_listed(out), out.stdout


def test_the_fixtures_are_listed_in_a_project_that_opts_in(tmp_path: Path) -> None:
    """`pytest --fixtures -p gpuscout.testing` in an empty folder shows the kit's fixtures."""
    out = _pytest_in(tmp_path, "-p", "gpuscout.testing")
    assert set(FIXTURES) <= _fixtures_listed(out), out.stdout + out.stderr


def test_a_third_party_test_file_uses_the_fixtures(pytester: pytest.Pytester) -> None:
    """A plugin author's tests that opt in (``-p gpuscout.testing``) get the fixtures without an
    import, and can override one."""
    pytester.makeconftest("""
        import pytest

        @pytest.fixture
        def gpuscout_env():
            return {"ACME_CARDS": "2"}
    """)
    pytester.makepyfile(
        test_acme=textwrap.dedent("""
        from gpuscout import DeviceInfo, hookimpl

        class Acme:
            @hookimpl
            def gpuscout_enumerate(self, context):
                count = int(context.env.get("ACME_CARDS", "0"))
                text = context.read_text("/sys/acme/total") or "0"
                return [DeviceInfo(id=str(i), library="Acme", total_memory=int(text))
                        for i in range(count)]

        def test_acme_reads_its_tree(gpuscout_scout, gpuscout_root, gpuscout_platform):
            root = gpuscout_root({"/sys/acme/total": "1024"})
            scout = gpuscout_scout(Acme(), root=root)
            assert gpuscout_platform == "linux" and scout.platform == "linux"
            assert [d.total_memory for d in scout.discover().devices] == [1024, 1024]

        def test_env_given_to_the_factory_wins(gpuscout_scout):
            assert gpuscout_scout(Acme(), env={}).discover().devices == []
    """)
    )
    pytester.runpytest("-p", "no:cacheprovider", "-p", "gpuscout.testing").assert_outcomes(passed=2)


def test_importing_the_kit_loads_no_wire_format_or_logging_library() -> None:
    """pytest imports the kit in every run that opts in: it must not pull in cattrs, structlog or
    the wire."""
    code = (
        "import sys, gpuscout.testing; print([m for m in ('cattrs', 'structlog', 'gpuscout._records.decode',"
        " 'rich', 'pynvml', 'gpuscout.plugins.cuda') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


# -- fixtures --------------------------------------------------------------------------------------


def test_the_default_env_keeps_the_real_vulkan_loader_away(
    gpuscout_env: dict[str, str],
    gpuscout_scout: ScoutFactory,
) -> None:
    """The default environment is nothing of this process's, plus what each plugin declares
    keeps it from the real machine (Vulkan: a driver manifest that does not exist)."""
    assert gpuscout_env == dict(DEFAULT_ENV) == {}
    assert plugin_test_env("vulkan", "cuda", "rocm") == {
        "VK_DRIVER_FILES": "/nonexistent/gpuscout-test-icd.json",
        "CUDA_VISIBLE_DEVICES": "",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "ROCR_VISIBLE_DEVICES": "",
    }
    assert dict(gpuscout_scout("vulkan").env) == plugin_test_env("vulkan")
    assert dict(gpuscout_scout("vulkan", env={"A": "1"}).env) == {"A": "1"}
    found = gpuscout_scout("vulkan").discover(include_software=True)
    assert found.devices == [] and found.dropped == []


def test_the_scout_holds_exactly_the_plugins_given(gpuscout_scout: ScoutFactory) -> None:
    """Built-in names, objects, modules and pairs mix; nothing else loads."""
    scout = gpuscout_scout("rocm", Card(), gpuscout.plugins.metal, ("pair", NoLibrary()))
    loaded = [r.name for r in scout.reports if r.status != "disabled"]
    assert loaded == ["rocm", "Card", "gpuscout.plugins.metal", "pair"]
    assert (dict(scout.env), scout.platform, scout.root) == ({"ROCR_VISIBLE_DEVICES": ""}, "linux", "/")


def test_the_scout_can_add_every_builtin(gpuscout_scout: ScoutFactory) -> None:
    """include_builtins adds the four built-ins before the plugins given."""
    scout = gpuscout_scout(injected([]), include_builtins=True)
    assert [r.name for r in scout.reports if r.status == "ok"] == [
        "cuda",
        "rocm",
        "metal",
        "vulkan",
        "injected",
    ]


def test_the_scout_passes_options_through(gpuscout_scout: ScoutFactory) -> None:
    """env, platform, root and the timeouts reach the Scout; disable blocks a plugin."""
    scout = gpuscout_scout(
        "cuda",
        "rocm",
        env={"A": "1"},
        platform="darwin",
        root=Path("/tmp"),
        enumerate_timeout=2.0,
        hook_timeout=0.5,
        disable=["rocm"],
    )
    assert (dict(scout.env), scout.platform, scout.root) == ({"A": "1"}, "darwin", "/tmp")
    assert (scout.enumerate_timeout, scout.hook_timeout) == (2.0, 0.5)
    assert [(r.name, r.status) for r in scout.reports if r.name in ("cuda", "rocm")] == [
        ("cuda", "ok"),
        ("rocm", "disabled"),
    ]


@pytest.mark.parametrize("option", ["plugins", "extra", "entry_points"])
def test_the_scout_refuses_to_load_other_plugins(gpuscout_scout: ScoutFactory, option: str) -> None:
    """The plugin lists are the kit's to write."""
    with pytest.raises(TypeError, match=option):
        options: dict[str, Any] = {option: []}
        gpuscout_scout(**options)


def test_two_plugins_of_one_name_are_refused(gpuscout_scout: ScoutFactory) -> None:
    """Two objects of one class need names of their own."""
    with pytest.raises(ValueError, match="two plugins named 'Card'"):
        gpuscout_scout(Card(), Card())


def test_the_root_factory_writes_files_fifos_and_links(gpuscout_root: RootFactory) -> None:
    """Text, bytes, a FIFO and a symlink land below a fresh folder."""
    root = gpuscout_root({"/sys/a/vendor": "0x1002\n", "/b": b"\xff", "/c": FIFO, "/d": Symlink("/dev/null")})
    assert root.is_dir() and root != gpuscout_root()
    assert (root / "sys/a/vendor").read_text() == "0x1002\n" and (root / "b").read_bytes() == b"\xff"
    assert (root / "c").is_fifo() and os.readlink(root / "d") == "/dev/null"


def test_the_root_factory_copies_a_tree_then_writes_over_it(
    gpuscout_root: RootFactory, gpuscout_scout: ScoutFactory
) -> None:
    """A spoiled copy of a recorded tree is what the plugin reads."""
    node = "/sys/class/kfd/kfd/topology/nodes/1/properties"
    root = gpuscout_root({node: "garbage\n"}, copy=TREES / "rx7900xtx")
    assert (root / node.lstrip("/")).read_text() == "garbage\n"
    assert (root / "sys/class/drm/renderD128/device/uevent").exists()
    assert gpuscout_scout("rocm", root=root).discover().devices == []


# -- the command line ------------------------------------------------------------------------------

CUDA_CARD = DeviceInfo(
    id="GPU-aaaa1111",
    library="CUDA",
    filter_id="GPU-aaaa1111",
    uuid="GPU-aaaa1111",
    pci_id="0000:01:00.0",
    total_memory=48 * GIB,
    free_memory=40 * GIB,
    compute_major=8,
)


def test_the_cli_runs_a_command_over_the_injected_devices(gpuscout_cli: CliRunner) -> None:
    """`env` over one injected CUDA card prints the variable the CUDA plugin's rule gives it."""
    run = gpuscout_cli(["env", "--format", "json", "all"], [CUDA_CARD])
    assert (run.code, run.err) == (0, "")
    assert run.json() == {"CUDA_VISIBLE_DEVICES": "GPU-aaaa1111"}


def test_the_cli_gives_the_exit_code_and_stderr(gpuscout_cli: CliRunner) -> None:
    """A selector that matches nothing exits 1 and says why on stderr, nothing on stdout."""
    code, out, err = gpuscout_cli(["env", "rocm:0"], [CUDA_CARD])
    assert (code, out) == (1, "") and "rocm:0" in err


def test_the_cli_hides_the_devices_a_builtin_would_find_here(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With NVML answering for an H200, a plain Scout finds it and the kit's command does not."""
    from gpuscout.plugins.cuda import enumeration as nvml
    from tests.conftest import fake_nvml

    h200 = fake_nvml(["h200"])
    monkeypatch.setattr(nvml, "_load_nvml", lambda context: h200)
    assert [d.description for d in scout_of("cuda", env={}).discover().devices] == ["NVIDIA H200"]
    run = gpuscout_cli(["list", "--json"], env={"CUDA_VISIBLE_DEVICES": "0"})
    assert (run.code, run.json()["devices"]) == (0, [])
    report = next(p for p in run.json()["plugins"] if p["name"] == "cuda")
    assert report["status"] == "ok" and "hidden from the test" in report["note"]


def test_the_cli_scout_sees_only_the_env_given(gpuscout_cli: CliRunner) -> None:
    """`exec` hands its command exactly ``env`` plus the selection's variables."""
    run = gpuscout_cli(
        [
            "exec",
            "--device",
            "all",
            "--",
            sys.executable,
            "-c",
            "import os, json; print(json.dumps(dict(os.environ)))",
        ],
        [CUDA_CARD],
        env={"PATH": os.environ.get("PATH", ""), "A": "1"},
    )
    assert run.code == 0, run.err
    seen = run.json()
    assert (seen["A"], seen["CUDA_VISIBLE_DEVICES"]) == ("1", "GPU-aaaa1111")
    assert "VK_DRIVER_FILES" not in seen


def test_the_cli_without_builtins_holds_only_the_injected_plugin_and_those_given(
    gpuscout_cli: CliRunner,
) -> None:
    """builtins=False leaves the four built-ins out; plugins= adds objects next to the devices."""
    run = gpuscout_cli(
        ["plugins", "--json"], [CUDA_CARD], plugins=[Card()], builtins=False, env={"FREE": "6"}
    )
    loaded = [p["name"] for p in run.json() if p["status"] != "disabled"]
    assert (run.code, loaded) == (0, ["injected", "Card"])


def test_the_cli_runs_over_a_scout_of_the_tests_own(gpuscout_cli: CliRunner) -> None:
    """``scout=`` replaces the kit's Scout: the command lists what that Scout finds."""
    mine = scout_of(("mine", Card()), env={"FREE": "5"})
    run = gpuscout_cli(["list", "--json"], scout=mine)
    assert [d["free_memory"] for d in run.json()["devices"]] == [5]


def test_the_cli_drops_output_printed_before_the_run(gpuscout_cli: CliRunner) -> None:
    """What the test printed before the command is not in the command's output."""
    print("before")
    run = gpuscout_cli(["list", "--json"])
    assert "before" not in run.out and isinstance(run.json(), dict)


def test_the_cli_gives_the_status_of_a_command_that_exits(gpuscout_cli: CliRunner) -> None:
    """`--help` exits instead of returning: its status is the code and its text is in out."""
    run = gpuscout_cli(["--help"])
    assert run.code == 0 and "exit codes:" in run.out


def test_the_cli_refuses_a_command_line_given_as_one_string(gpuscout_cli: CliRunner) -> None:
    """argv is a list: a bare str (which would run as one letter per argument) is a TypeError."""
    with pytest.raises(TypeError, match="list of arguments"):
        gpuscout_cli("list --json")


def test_the_cli_example_of_the_plugin_guide_passes(pytester: pytest.Pytester) -> None:
    """docs/plugins.md's tests/test_acme_cli.py, run as a plugin author's test file, passes."""
    guide = (Path(__file__).parent.parent / "docs" / "plugins.md").read_text(encoding="utf-8")
    after = guide[guide.index("`tests/test_acme_cli.py`") :]
    source = after[after.index("```python\n") + len("```python\n") :]
    pytester.makepyfile(test_acme_cli=source[: source.index("```")])
    pytester.runpytest("-p", "no:cacheprovider", "-p", "gpuscout.testing").assert_outcomes(passed=2)


# -- helpers ---------------------------------------------------------------------------------------


def test_write_tree_replaces_a_fifo_instead_of_opening_it(tmp_path: Path) -> None:
    """Writing over a FIFO removes it first (opening it for writing would block)."""
    write_tree(tmp_path, {"/f": FIFO})
    promptly(lambda: write_tree(tmp_path, {"/f": "text"}), seconds=5)
    assert (tmp_path / "f").read_text() == "text"


def test_write_tree_keeps_lone_surrogates(tmp_path: Path) -> None:
    """Any Hypothesis text can be written."""
    write_tree(tmp_path, {"/f": "a\ud800b"})
    assert (tmp_path / "f").read_bytes() == b"a\xed\xa0\x80b"


def test_promptly_gives_the_answer_or_the_exception() -> None:
    """The call's value comes back; so does its exception."""
    assert promptly(lambda: 7) == 7
    with pytest.raises(KeyError):
        empty: dict[str, int] = {}
        promptly(lambda: empty["missing"])


def test_promptly_fails_a_call_that_hangs() -> None:
    """A call still running after the limit is an AssertionError, not a hung test."""
    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"still running after 0\.2 s"):
        promptly(lambda: time.sleep(30), seconds=0.2)
    assert time.monotonic() - start < 2


@pytest.mark.parametrize(
    ("value", "ok"), [(None, True), (0, True), (2**64 - 1, True), (2**64, False), (-1, False)]
)
def test_in_u64_accepts_only_what_a_kernel_counter_holds(value: int | None, ok: bool) -> None:
    """None or 0..2**64-1."""
    assert in_u64(value) is ok


def test_injected_devices_report_what_they_are_given(gpuscout_scout: ScoutFactory) -> None:
    """injected() names an InjectedDevices plugin; its devices are discovered."""
    name, plugin = injected([DeviceInfo(id="0", library="X")], name="mine")
    assert (name, type(plugin)) == ("mine", InjectedDevices)
    assert [d.id for d in gpuscout_scout((name, plugin)).discover().devices] == ["0"]


# -- check_plugin ----------------------------------------------------------------------------------


def test_check_plugin_passes_a_good_plugin() -> None:
    """A plugin with sane records has no problems."""
    assert check_plugin(Card()) == []


def test_check_plugin_flags_records_without_library() -> None:
    """A record without a library is named as a problem."""
    assert check_plugin(NoLibrary()) == ["device '0' has no library"]


def _with(base: type, hook: str, params: str, answer: Any) -> Any:
    """An instance of ``base`` whose ``hook`` (with ``params``) answers ``answer``."""
    namespace: dict[str, Any] = {}
    exec(f"def {hook}(self, {params}):\n    return ANSWER", {"ANSWER": answer}, namespace)
    return type(f"Bad_{hook}", (base,), {hook: hookimpl(namespace[hook])})()


class Misspelled(Card):
    @hookimpl
    def gpuscout_enumerat(self, context: Any) -> list[DeviceInfo]:
        return []


class MisspelledUndecorated(Card):
    def gpuscout_enumerat(self, context: Any) -> list[DeviceInfo]:
        return []


class Undecorated:
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return []


class FromTheFuture(Card):
    GPUSCOUT_API_VERSION = 99


class Twice(Card):
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return [DeviceInfo(id="0", library="Mine"), DeviceInfo(id="0", library="Mine", pci_id="0000:01:00.0")]


class Invisible:
    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> list[DeviceInfo]:
        return [DeviceInfo(id="0", library="Mine")]


class Greedy(Card):
    @hookimpl
    def gpuscout_flash_attention(self, device: DeviceInfo) -> bool | None:
        return True


BAD_PLUGINS = [
    (
        "misspelled hook",
        Misspelled(),
        "gpuscout_enumerat is not a gpuscout hook: did you mean gpuscout_enumerate?",
    ),
    (
        "misspelled, undecorated",
        MisspelledUndecorated(),
        "gpuscout_enumerat is not a gpuscout hook: did you mean gpuscout_enumerate?",
    ),
    (
        "undecorated hook",
        Undecorated(),
        "gpuscout_enumerate is not decorated with gpuscout.hookimpl: pluggy never calls it",
    ),
    ("no hooks", object(), "implements no gpuscout hook"),
    ("later API", FromTheFuture(), "GPUSCOUT_API_VERSION: written for gpuscout hook API 99"),
    (
        "enumerate answers a dict",
        _with(Card, "gpuscout_enumerate", "context", {"a": 1}),
        "failed: gpuscout_enumerate: returned dict, expected a list of DeviceInfo",
    ),
    (
        "flash attention answers a str",
        _with(Card, "gpuscout_flash_attention", "device", "yes"),
        "gpuscout_flash_attention: returned str 'yes', expected bool or None (device '0')",
    ),
    (
        "negative minimum memory",
        _with(Card, "gpuscout_minimum_memory", "device", -1),
        "gpuscout_minimum_memory: returned int -1, expected a non-negative int or None (device '0')",
    ),
    (
        "preference answers an int",
        _with(Card, "gpuscout_preferred_library", "device, other", 1),
        "gpuscout_preferred_library: returned int 1, expected bool or None (devices '0' and '0')",
    ),
    (
        "init env of ints",
        _with(Card, "gpuscout_validate_init", "device, context", {"A": 1}),
        "gpuscout_validate_init: returned dict {'A': 1}, expected a str->str mapping or None",
    ),
    (
        "visible env of the wrong shape",
        _with(Card, "gpuscout_visible_env", "selection, context", [("0", "A", "B")]),
        "gpuscout_visible_env: returned list [('0', 'A', 'B')], expected a list of EnvEntry or None",
    ),
    (
        "isolate env as a list",
        _with(Card, "gpuscout_isolate_env", "selection, env, context", ["x"]),
        "gpuscout_isolate_env: returned list ['x'], expected a str->str mapping or None",
    ),
    (
        "refresh of strings",
        _with(Card, "gpuscout_refresh", "devices, context", ["x"]),
        "gpuscout_refresh: returned list ['x'], expected a list of DeviceInfo (devices '0')",
    ),
    (
        "unhashable duplicate key",
        _with(Card, "gpuscout_duplicate_key", "device", []),
        "gpuscout_duplicate_key: returned list [], expected a hashable key or None (device '0')",
    ),
    (
        "duplicate answer as a str",
        _with(Card, "gpuscout_is_duplicate", "a, b", "no"),
        "gpuscout_is_duplicate: returned str 'no', expected bool or None (devices '0' and '0')",
    ),
    ("one DeviceID twice", Twice(), "device '0' of library 'Mine' is reported 2 times"),
    (
        "devices without visible_env",
        Invisible(),
        "reports devices but does not implement gpuscout_visible_env: `gpuscout env` and "
        "`gpuscout exec` cannot select its devices",
    ),
    (
        "answers for other libraries",
        Greedy(),
        "gpuscout_flash_attention answers True about a device of library 'gpuscout-check-foreign'",
    ),
]


@pytest.mark.parametrize(("plugin", "problem"), [c[1:] for c in BAD_PLUGINS], ids=[c[0] for c in BAD_PLUGINS])
def test_check_plugin_names_each_problem(plugin: Any, problem: str) -> None:
    """Each kind of misbehaviour is one message naming the hook or the device."""
    problems = check_plugin(plugin)
    assert any(p.startswith(problem) for p in problems), problems


def test_check_plugin_names_a_record_the_wire_format_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record that does not read back equal (here: a wire format that loses names) is named."""
    import gpuscout._records.encode

    real = gpuscout._records.encode.to_json
    monkeypatch.setattr(gpuscout._records.encode, "to_json", lambda obj: real(obj.evolve(description="")))
    card = _with(
        Card, "gpuscout_enumerate", "context", [DeviceInfo(id="0", library="Mine", description="Acme")]
    )
    assert check_plugin(card) == ["device '0' does not survive the wire format"]


def test_a_misspelled_hook_on_a_module_gets_a_suggestion() -> None:
    """Modules are inspected like objects."""
    module = types.ModuleType("acme_backend")
    module.gpuscout_minimum_memroy = hookimpl(lambda device: None)  # type: ignore[attr-defined]
    assert check_plugin(module)[0] == (
        "gpuscout_minimum_memroy is not a gpuscout hook: did you mean gpuscout_minimum_memory?"
    )


@pytest.mark.parametrize(
    "module",
    [gpuscout.plugins.cuda, gpuscout.plugins.rocm, gpuscout.plugins.metal, gpuscout.plugins.vulkan],
    ids=lambda m: m.__name__,
)
def test_check_plugin_accepts_the_builtins_finding_nothing(module: Any, tmp_path: Path) -> None:
    """Each built-in over an empty root, without drivers, has no problems."""
    assert check_plugin(module, env=plugin_test_env(module), root=tmp_path) == []


@pytest.mark.parametrize("tree", sorted(p.name for p in TREES.iterdir()))
def test_check_plugin_accepts_rocm_over_each_recorded_tree(tree: str) -> None:
    """The ROCm plugin's records, rules and env over recorded cards have no problems."""
    assert check_plugin(gpuscout.plugins.rocm, root=TREES / tree) == []


def test_check_plugin_accepts_vulkan_over_lavapipe(lavapipe_env: dict[str, str]) -> None:
    """The Vulkan plugin reporting lavapipe has no problems."""
    assert check_plugin(gpuscout.plugins.vulkan, env=lavapipe_env) == []
