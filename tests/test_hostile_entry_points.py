"""Hostile third-party plugins installed for real through entry points, written as an outsider
would from the README, and driven through ``python -m gpuscout`` in a child process: imports and
hooks that never return, imports that raise or exit, bad records, rich markup, many devices,
and plugin names in odd case. Each run ends by itself or is killed by its timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import pytest

BUILTINS = "cuda,rocm,metal,vulkan"
#: Generous bound on a run whose plugins overrun 1 s deadlines (start-up on a busy 2-core box).
PROMPT = 8.0

GOOD = """
    from gpuscout import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        return [DeviceInfo(id="good0", library="Good", name="Good card",
                           total_memory=8 << 30, free_memory=4 << 30)]
"""

# Two devices of different libraries, no PCI id, same description: only plugins can tell
# whether they are one card, so a merge asks is_duplicate / duplicate_key / preferred_library.
TWINS = """
    from gpuscout import DeviceInfo, hookimpl

    @hookimpl
    def gpuscout_enumerate(context):
        return [DeviceInfo(id="0", library="AcmeA", name="Acme X", description="Acme X",
                           total_memory=8 << 30, free_memory=2 << 30),
                DeviceInfo(id="0", library="AcmeB", name="Acme X", description="Acme X",
                           total_memory=8 << 30, free_memory=2 << 30)]
"""
IS_DUPLICATE = """
    @hookimpl
    def gpuscout_is_duplicate(a, b):
        return True
"""
# Selected beside the hanging plugin in `env` runs, to show the selection still gets its env.
SHOW = """
    from gpuscout import EnvEntry, hookimpl

    @hookimpl
    def gpuscout_visible_env(selection, context):
        return [EnvEntry(i, "ACME_VISIBLE_DEVICES", d.id) for i, d in enumerate(selection)]
"""


def hang(hook: str, args: str) -> str:
    """Source of a ``hook`` implementation taking ``args`` that sleeps for an hour."""
    return f"""
    @hookimpl
    def {hook}({args}):
        import time
        time.sleep(3600)
"""


@attrs.frozen
class Run:
    """How one ``python -m gpuscout`` (or ``python -c``) run ended."""

    code: int
    out: str
    err: str
    wall: float

    def json(self) -> Any:
        """Standard output parsed as JSON."""
        return json.loads(self.out)

    def reports(self) -> dict[str, dict[str, object]]:
        """The plugin reports of ``list --json`` or ``plugins --json`` output, by name."""
        data = self.json()
        items = data["plugins"] if isinstance(data, dict) else data
        assert isinstance(items, list)
        return {r["name"]: r for r in items}


def child_env(site: Path, **extra: str) -> dict[str, str]:
    """This environment with ``site`` installed, no plugin lists and no Vulkan driver."""
    env = {k: v for k, v in os.environ.items() if k not in ("GPUSCOUT_PLUGINS", "GPUSCOUT_DISABLE_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return {**env, "VK_DRIVER_FILES": "/nonexistent.json", **extra}


def run(site: Path, *args: str, timeout: float = 60, cli: bool = True, **env: str) -> Run:
    """Run ``gpuscout ARGS`` (or ``python ARGS``) with ``site`` installed; killed at ``timeout``."""
    argv = [sys.executable, "-m", "gpuscout", *args] if cli else [sys.executable, *args]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env(site, **env))
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - start)


def run_all(site: Path, commands: Sequence[Sequence[str]]) -> list[Run]:
    """``gpuscout COMMAND`` for each command at once (each waits mostly on a deadline)."""
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda c: run(site, *c), commands))


def log_events(err: str, event: str) -> list[dict[str, object]]:
    """The ``--log-format json`` lines on stderr whose event is ``event``."""
    return [
        e
        for e in (json.loads(line) for line in err.splitlines() if line.startswith("{"))
        if e.get("event") == event
    ]


# -- imports that never return, raise or exit --------------------------------------------------


def test_a_plugin_whose_import_never_returns_costs_one_timeout(site_factory: Callable[..., Path]) -> None:
    """A module that sleeps at import is reported `timeout` after `--timeout`; the rest is listed."""
    site = site_factory(
        "acme-hang",
        "1.0",
        {"acme_hang": "import time\ntime.sleep(3600)\n", "acme_good": GOOD},
        {"hang": "acme_hang", "good": "acme_good"},
    )
    common = ["--plugins", "hang,good", "--timeout", "1"]
    listed, plugins = run_all(site, [["list", "--json", *common], ["plugins", "--json", *common]])
    for result in (listed, plugins):
        assert result.code == 0 and result.wall < PROMPT, (result.wall, result.err)
        hung = result.reports()["hang"]
        assert hung["status"] == "timeout" and "import" in str(hung["error"]), hung
        assert result.reports()["good"]["status"] == "ok"
    assert [d["id"] for d in listed.json()["devices"]] == ["good0"]


@pytest.mark.parametrize(
    "source, error",
    [
        pytest.param("raise RuntimeError('no acme driver')\n", "RuntimeError: no acme driver", id="raises"),
        pytest.param("import sys\nsys.exit(0)\n", "sys.exit(0)", id="sys-exit"),
    ],
)
def test_a_plugin_whose_import_raises_or_exits_fails_alone(
    site_factory: Callable[..., Path], source: str, error: str
) -> None:
    """An import that raises or calls sys.exit fails that plugin; the command carries on."""
    site = site_factory(
        "acme-bad", "1.0", {"acme_bad": source, "acme_good": GOOD}, {"bad": "acme_bad", "good": "acme_good"}
    )
    result = run(site, "list", "--json", "--disable", BUILTINS)
    assert result.code == 0, result.err
    reports = result.reports()
    assert reports["bad"]["status"] == "failed" and error in str(reports["bad"]["error"])
    assert reports["good"]["status"] == "ok"
    assert [d["id"] for d in result.json()["devices"]] == ["good0"]


# -- rule hooks that never return --------------------------------------------------------------

PY_DRIVER = """
import json, sys, time
from gpuscout import DeviceInfo, Scout
name, method = sys.argv[1:]
scout = Scout(plugins=[name], hook_timeout=0.5, enumerate_timeout=1.5)
devs = [DeviceInfo(id="0", library="Acme", free_memory=1 << 30)]
arg = devs[0] if method == "needs_init_validation" else devs
out = []
for _ in range(2):
    start = time.monotonic()
    answer = getattr(scout, method)(arg)
    out.append([answer if isinstance(answer, bool) else [d.id for d in answer],
                time.monotonic() - start])
report = next(r for r in scout.reports if r.name == name)
print(json.dumps({"calls": out, "status": str(report.status), "error": report.error}))
"""

NO_TWINS = """
@hookimpl
def gpuscout_is_duplicate(a, b):
    return None
"""

# hook -> (its arguments, the plugin's other hooks, command or Scout method, its answer)
HOOKS: dict[str, tuple[str, tuple[str, ...], list[str], object]] = {
    "gpuscout_is_duplicate": ("a, b", (TWINS,), ["list", "--json"], ["AcmeA", "AcmeB"]),
    # Keys only matter to a heuristic, so this plugin has one (which never says "twins").
    "gpuscout_duplicate_key": ("device", (TWINS, NO_TWINS), ["list", "--json"], ["AcmeA", "AcmeB"]),
    "gpuscout_preferred_library": ("device, other", (TWINS, IS_DUPLICATE), ["list", "--json"], ["AcmeA"]),
    "gpuscout_minimum_memory": (
        "device",
        (TWINS,),
        ["env", "fits:1GiB"],
        "export ACME_VISIBLE_DEVICES='0,0'\n",
    ),
    "gpuscout_visible_env": (
        "selection, context",
        (TWINS,),
        ["env", "best", "--isolate"],
        "export ACME_VISIBLE_DEVICES='0'\n",
    ),
    "gpuscout_isolate_env": (
        "selection, env, context",
        (TWINS,),
        ["env", "best", "--isolate"],
        "export ACME_VISIBLE_DEVICES='0'\n",
    ),
    "gpuscout_flash_attention": ("device", (), ["flash_attention_supported"], False),
    "gpuscout_validate_init": ("device, context", (), ["needs_init_validation"], False),
    "gpuscout_refresh": ("devices, context", (), ["refresh"], ["0"]),
}


@pytest.fixture(scope="module")
def hook_runs(site_factory: Callable[..., Path]) -> dict[str, Run]:
    """One run per hanging hook, all at once: plugin ``hang_<hook>`` answers nothing else."""
    header = "from gpuscout import hookimpl\n"
    modules = {
        f"acme_{hook}": "\n".join(map(textwrap.dedent, (header, *others, hang(hook, args))))
        for hook, (args, others, _, _) in HOOKS.items()
    }
    site = site_factory(
        "acme-hooks",
        "1.0",
        {**modules, "acme_show": SHOW},
        {"show": "acme_show", **{f"hang_{h[9:]}": f"acme_{h}" for h in HOOKS}},
    )

    def one(hook: str) -> Run:
        name, command = f"hang_{hook[9:]}", HOOKS[hook][2]
        if command[0] == "list":
            return run(site, *command, "--plugins", name)
        if command[0] == "env":
            return run(site, *command, "--plugins", f"{name},show", "-v", "--log-format", "json")
        return run(site, "-c", PY_DRIVER, name, command[0], cli=False)

    with ThreadPoolExecutor(len(HOOKS)) as pool:
        return dict(zip(HOOKS, pool.map(one, HOOKS), strict=True))


@pytest.mark.parametrize("hook", list(HOOKS))
def test_a_rule_hook_that_never_returns_is_reported_and_skipped(hook_runs: dict[str, Run], hook: str) -> None:
    """A hanging hook costs its deadline once per run; the command answers as if it were absent."""
    result, name, (_, _, command, expected) = hook_runs[hook], f"hang_{hook[9:]}", HOOKS[hook]
    assert result.code == 0 and result.wall < PROMPT, (result.wall, result.err)
    if command[0] == "list":
        assert [d["backend"] for d in result.json()["devices"]] == expected
        report = result.reports()[name]
        assert report["status"] == "timeout" and hook in str(report["error"]), report
    elif command[0] == "env":
        assert result.out == expected
        timeouts = log_events(result.err, "discovery.plugin_timeout")
        assert [(e["plugin"], e["hook"]) for e in timeouts] == [(name, hook)], result.err
    else:
        answer = result.json()
        assert isinstance(answer, dict), answer
        assert answer["status"] == "timeout" and hook in answer["error"], answer
        (first, slow), (second, again) = answer["calls"]
        assert first == second == expected
        if hook == "gpuscout_refresh":
            # Under the enumerate deadline; the next refresh asks again, waiting for the call
            # still running (no second one starts), so it costs that deadline once more.
            assert 1.4 < slow < 4 and 1.4 < again < 4, answer["calls"]
        else:
            assert 0.4 < slow < 3 and again < 0.25, answer["calls"]


# -- bad records -------------------------------------------------------------------------------


def test_a_record_with_a_wrong_field_type_fails_only_its_plugin(site_factory: Callable[..., Path]) -> None:
    """`pci_id=1234` or `integrated="no"` fails that plugin, naming the field; others are listed."""
    bad = """
        from gpuscout import DeviceInfo, hookimpl

        @hookimpl
        def gpuscout_enumerate(context):
            return [DeviceInfo(id="b0", library="Bad", {field})]
    """
    site = site_factory(
        "acme-records",
        "1.0",
        {
            "acme_pci": bad.format(field="pci_id=1234"),
            "acme_integrated": bad.format(field='integrated="no"'),
            "acme_good": GOOD,
        },
        {"pci": "acme_pci", "integrated": "acme_integrated", "good": "acme_good"},
    )
    result = run(site, "list", "--json", "--disable", BUILTINS)
    assert result.code == 0, result.err
    assert [d["id"] for d in result.json()["devices"]] == ["good0"]
    reports = result.reports()
    assert reports["pci"]["status"] == reports["integrated"]["status"] == "failed"
    assert "pci_id: expected str, got 1234" in str(reports["pci"]["error"])
    assert "integrated: expected bool, got 'no'" in str(reports["integrated"]["error"])


# -- environment -------------------------------------------------------------------------------


def test_a_plugin_cannot_change_what_an_exec_child_inherits(site_factory: Callable[..., Path]) -> None:
    """Writes to `context.env` (plain or through its referent) never reach `gpuscout exec`'s child."""
    site = site_factory(
        "acme-evil",
        "1.0",
        {
            "acme_loud": """
            from gpuscout import hookimpl

            @hookimpl
            def gpuscout_enumerate(context):
                context.env["CUDA_VISIBLE_DEVICES"] = "x"
                return []
        """,
            "acme_sly": """
            import gc
            from gpuscout import DeviceInfo, hookimpl

            def tamper(env):
                for target in [env, *gc.get_referents(env)]:
                    try:
                        target["CUDA_VISIBLE_DEVICES"] = "x"
                    except Exception:
                        pass

            @hookimpl
            def gpuscout_enumerate(context):
                tamper(context.env)
                return [DeviceInfo(id="s0", library="Sly", free_memory=1 << 30)]

            @hookimpl
            def gpuscout_visible_env(selection, context):
                tamper(context.env)
                return None
        """,
        },
        {"loud": "acme_loud", "sly": "acme_sly"},
    )
    child = 'import os; print(os.environ.get("CUDA_VISIBLE_DEVICES"))'
    result = run(
        site,
        "exec",
        "--disable",
        BUILTINS,
        "-v",
        "--log-format",
        "json",
        "--",
        sys.executable,
        "-c",
        child,
        CUDA_VISIBLE_DEVICES="orig",
    )
    assert result.code == 0, result.err
    assert result.out == "orig\n"
    failed = log_events(result.err, "discovery.plugin_failed")
    assert [e["plugin"] for e in failed] == ["loud"] and "TypeError" in str(failed[0]), result.err


# -- many devices ------------------------------------------------------------------------------


def test_twenty_thousand_devices_from_one_plugin_are_all_listed(site_factory: Callable[..., Path]) -> None:
    """A plugin answering 20,000 distinct devices gets every one of them listed."""
    site = site_factory(
        "acme-many",
        "1.0",
        {
            "acme_many": """
        from gpuscout import DeviceInfo, hookimpl

        @hookimpl
        def gpuscout_enumerate(context):
            return [DeviceInfo(id=f"d{i}", library="Many", free_memory=i) for i in range(20000)]
    """
        },
        {"many": "acme_many"},
    )
    result = run(site, "list", "--json", "--plugins", "many", "--timeout", "30")
    assert result.code == 0, result.err
    ids = {d["id"] for d in result.json()["devices"]}
    assert ids == {f"d{i}" for i in range(20000)}


# -- markup ------------------------------------------------------------------------------------

MARKUP = "[/beta] [link=https://example.com]x[/link]"


@pytest.fixture(scope="module")
def markup_site(site_factory: Callable[..., Path]) -> Path:
    """Plugins whose device name and error message hold rich markup."""
    return site_factory(
        "acme-markup",
        "1.0",
        {
            "acme_name": f"""
            from gpuscout import DeviceInfo, hookimpl

            @hookimpl
            def gpuscout_enumerate(context):
                return [DeviceInfo(id="m0", library="Markup", name="Card {MARKUP}")]
        """,
            "acme_raise": """
            from gpuscout import hookimpl

            @hookimpl
            def gpuscout_enumerate(context):
                raise RuntimeError("driver said [/beta]")
        """,
        },
        {"markup": "acme_name", "broken": "acme_raise"},
    )


def test_markup_in_a_device_name_is_printed_literally(markup_site: Path) -> None:
    """The `list` table shows `[/beta]` and `[link=...]` as text, not as markup or a traceback."""
    result = run(markup_site, "list", "--disable", BUILTINS, COLUMNS="200")
    assert result.code == 0 and "Traceback" not in result.err, result.err
    assert f"Card {MARKUP}" in result.out, result.out


def test_markup_in_a_plugin_error_is_printed_literally(markup_site: Path) -> None:
    """The `plugins` table shows an error holding `[/beta]` as text."""
    result = run(markup_site, "plugins", "--disable", BUILTINS, COLUMNS="200")
    assert result.code == 0 and "Traceback" not in result.err, result.err
    assert "RuntimeError: driver said [/beta]" in result.out, result.out


# -- names -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def acme_site(site_factory: Callable[..., Path]) -> Path:
    """A distribution whose entry point is named `Acme`, in mixed case."""
    return site_factory("gpuscout-acme", "1.0", {"gpuscout_acme": GOOD}, {"Acme": "gpuscout_acme"})


def test_a_mixed_case_entry_point_is_selected_by_its_name_in_any_case(acme_site: Path) -> None:
    """`--plugins ' acme '` selects the plugin published as `Acme`."""
    result = run(acme_site, "list", "--json", "--plugins", " acme ")
    assert result.code == 0, result.err
    assert result.reports()["Acme"]["status"] == "ok"
    assert all(r["status"] == "disabled" for n, r in result.reports().items() if n != "Acme")
    assert [d["id"] for d in result.json()["devices"]] == ["good0"]


def test_an_unknown_allowed_plugin_is_one_error_line_naming_the_entry_points(acme_site: Path) -> None:
    """`--plugins nosuch` exits 2 with one stderr line that lists acme among the known plugins."""
    result = run(acme_site, "list", "--plugins", "nosuch")
    assert result.code == 2 and result.out == ""
    assert len(result.err.splitlines()) == 1, result.err
    assert "nosuch" in result.err and "known plugins: acme, cuda" in result.err, result.err


def test_an_unknown_disabled_plugin_is_one_warning_line(acme_site: Path) -> None:
    """`--disable nosuch` works, with one warning line."""
    result = run(acme_site, "list", "--json", "--disable", "nosuch")
    assert result.code == 0, result.err
    assert len(result.err.splitlines()) == 1, result.err
    assert result.err.startswith("gpuscout: warning:") and "nosuch" in result.err
    assert result.reports()["Acme"]["status"] == "ok"
