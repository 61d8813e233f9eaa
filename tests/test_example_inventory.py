"""The out-of-tree example plugin (examples/gpuscout-inventory) installed as a third party would:
both distributions built from source and installed into a fresh virtual environment, offline,
then driven through that environment's ``gpuscout`` command.

The venv is built once for the module (about 4 s on 2 cores; the whole module takes about
10 s). It has no pip of its own: a ``.pth`` file lends it this interpreter's site-packages for
the dependencies (pluggy, attrs, cattrs, structlog, rich, setuptools, pytest), and this
interpreter's pip installs into it with
``--python`` (``--no-index --no-deps --no-build-isolation``: no network). Both projects are
copied into tmp_path first, so the build writes no ``build/`` or ``*.egg-info`` into the
repository while other builds may run there. Every command runs with a made-up environment
(no VIRTUAL_ENV, no PYTHONPATH, ``GPUSCOUT_PLUGINS=inventory``), so neither the machine's real
hardware, nor a plugin installed where the dependencies are lent from, nor the developer's shell
matters.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from gpuscout.sizes import GIB

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "gpuscout-inventory"
BUILTINS = "vulkan,cuda,rocm,metal"
#: Budget for building the venv: measured about 4 s on 2 cores, generous for a loaded CI box.
BUILD_BUDGET_S = 60.0

INVENTORY = {
    "devices": [
        {
            "id": "big",
            "name": "Big card",
            "total_memory": "24GiB",
            "free_memory": "20GiB",
            "flash_attention": True,
        },
        {"name": "Small card", "total_memory": 8 * GIB, "free_memory": 6 * GIB},
        {
            "id": "igpu",
            "name": "Integrated part",
            "integrated": True,
            "pci_id": "0000:c4:00.0",
            "total_memory": "4GiB",
            "free_memory": "3GiB",
        },
    ]
}


@attrs.frozen
class Venv:
    """A fresh venv holding both distributions, and the environment commands run with."""

    root: Path
    env: Mapping[str, str]
    build_seconds: float
    #: The copy of the example that was built (its tests live there).
    example: Path

    @property
    def gpuscout(self) -> str:
        return str(self.root / "bin" / "gpuscout")

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    def run(
        self, *argv: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` run with the venv's environment updated by ``env``."""
        return subprocess.run(
            list(argv),
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
            cwd=cwd or self.root,
        )


def _copy_sources(into: Path) -> tuple[Path, Path]:
    """Copies of the main project and the example that a build may litter."""
    litter = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".*cache")
    main = into / "gpuscout"
    main.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, main / name)
    for name in ("core", "plugins"):
        shutil.copytree(REPO / name, main / name, ignore=litter)
    example = into / "gpuscout-inventory"
    shutil.copytree(EXAMPLE, example, ignore=litter)
    return main, example


def _clean_env(**more: str) -> dict[str, str]:
    """A minimal environment: nothing of the developer's shell, venv or Python path."""
    env = {"PATH": os.defpath, "LC_ALL": "C.UTF-8", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(more)
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with gpuscout and gpuscout-inventory installed from source, offline."""
    start = time.monotonic()
    work = tmp_path_factory.mktemp("example-inventory")
    main, example = _copy_sources(work)
    root = work / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120, env=_clean_env()
    )
    purelib = subprocess.run(
        [str(root / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
        env=_clean_env(),
    ).stdout.strip()
    # The dependencies come from this interpreter's site-packages; the venv's own comes first,
    # so what is installed into it wins over anything of the same name found there.
    user = [site.getusersitepackages()] if site.ENABLE_USER_SITE else []
    lent = [p for p in (*site.getsitepackages(), *user) if os.path.isdir(p)]
    Path(purelib, "_lent_dependencies.pth").write_text("\n".join(lent) + "\n", encoding="utf-8")
    pip_env = _clean_env(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        PIP_NO_CACHE_DIR="1",
        HOME=str(work),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(root / "bin" / "python"),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            str(main),
            str(example),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=pip_env,
        cwd=work,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps(INVENTORY), encoding="utf-8")
    env = _clean_env(
        PATH=f"{root / 'bin'}{os.pathsep}{os.defpath}",
        HOME=str(work),
        GPUSCOUT_INVENTORY=str(inventory),
        GPUSCOUT_PLUGINS="inventory",
    )
    return Venv(root, env, time.monotonic() - start, example)


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _inventory_report(reports: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in reports if r["name"] == "inventory")


def test_venv_is_built_within_budget(venv: Venv) -> None:
    """Building and installing both distributions offline takes well under a minute."""
    assert venv.build_seconds < BUILD_BUDGET_S, f"took {venv.build_seconds:.1f} s"


def test_venv_imports_the_freshly_installed_distributions(venv: Venv) -> None:
    """The venv's gpuscout and gpuscout_inventory are the ones installed into it."""
    code = "import gpuscout, gpuscout_inventory; print(gpuscout.__file__); print(gpuscout_inventory.__file__)"
    lines = venv.run(venv.python, "-c", code).stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert Path(line).resolve().is_relative_to(venv.root.resolve()), line


def test_plugins_command_shows_inventory_ok_with_its_device_count(venv: Venv) -> None:
    """``gpuscout plugins --json``: inventory, from its distribution, ok, three devices."""
    report = _inventory_report(_json(venv.run(venv.gpuscout, "plugins", "--json")))
    assert report["status"] == "ok"
    assert report["devices"] == 3
    assert report["distribution"].replace("_", "-") == "gpuscout-inventory"
    assert report["version"] == "0.1.0"
    assert "gpuscout_visible_env" in report["hooks"]


def test_builtins_are_blocked_so_the_test_is_hermetic(venv: Venv) -> None:
    """The vendor plugins are blocked: the machine's own hardware cannot show up."""
    reports = _json(venv.run(venv.gpuscout, "plugins", "--json"))
    statuses = {r["name"]: r["status"] for r in reports}
    assert {statuses[n] for n in BUILTINS.split(",")} == {"disabled"}


def test_list_command_lists_the_inventory_devices(venv: Venv) -> None:
    """``gpuscout list --json`` ranks the file's devices, discrete first."""
    found = _json(venv.run(venv.gpuscout, "list", "--json"))
    assert [(d["backend"], d["id"], d["name"]) for d in found["devices"]] == [
        ("Inventory", "big", "Big card"),
        ("Inventory", "1", "Small card"),
        ("Inventory", "igpu", "Integrated part"),
    ]
    assert found["devices"][0]["total_memory"] == 24 * GIB


def test_list_command_with_the_vendor_plugins_disabled(venv: Venv) -> None:
    """Blocking the built-ins with the deny list instead gives the same Inventory devices."""
    done = venv.run(
        venv.gpuscout, "list", "--json", env={"GPUSCOUT_PLUGINS": "", "GPUSCOUT_DISABLE_PLUGINS": BUILTINS}
    )
    found = _json(done)
    assert [d["id"] for d in found["devices"] if d["backend"] == "Inventory"] == ["big", "1", "igpu"]
    assert {r["name"]: r["status"] for r in found["plugins"]}["inventory"] == "ok"


def test_env_verify_proves_a_child_sees_only_the_selected_device(venv: Venv) -> None:
    """``gpuscout env inventory:0 --verify`` exits 0 and prints the visibility variable."""
    done = venv.run(venv.gpuscout, "env", "inventory:0", "--verify")
    assert done.returncode == 0, done.stderr
    # inventory:N is the plugin's own number: the first device of its file.
    assert done.stdout == "export GPUSCOUT_INVENTORY_VISIBLE_DEVICES='big'\n"
    assert "verified: the child sees exactly the 1 selected device: " in done.stderr


def test_exec_runs_a_child_that_sees_only_the_selection(venv: Venv) -> None:
    """``gpuscout exec --device`` hands the child an environment showing only the selection."""
    done = venv.run(
        venv.gpuscout,
        "exec",
        "--device",
        "big",
        "--device",
        "1",
        "--verify",
        "--",
        venv.gpuscout,
        "list",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert [d["id"] for d in json.loads(done.stdout)["devices"]] == ["big", "1"]


def test_a_bad_inventory_is_a_note_not_a_failure(venv: Venv) -> None:
    """A file with a bad key leaves the plugin ok with no device and a note naming the key."""
    bad = venv.root.parent / "bad.toml"
    bad.write_text('[[devices]]\nname = "x"\ntotl_memory = 1\n', encoding="utf-8")
    done = venv.run(venv.gpuscout, "plugins", "--json", env={"GPUSCOUT_INVENTORY": str(bad)})
    report = _inventory_report(_json(done))
    assert (report["status"], report["devices"]) == ("ok", 0)
    assert f"{bad}: device 0, key 'totl_memory'" in report["note"]


_IMPORTED = (
    "import sys; from gpuscout import Scout; "
    "found = Scout(disable={disable}).discover(); "
    "print('gpuscout_inventory' in sys.modules, "
    "[r.status.value for r in found.plugins if r.name == 'inventory'])"
)


@pytest.mark.parametrize(
    ("disable", "extra_env", "imported", "status"),
    [
        ([], {}, True, "ok"),
        (["inventory"], {}, False, "disabled"),
        ([], {"GPUSCOUT_DISABLE_PLUGINS": "inventory"}, False, "disabled"),
    ],
    ids=["enabled", "disable-argument", "disable-env"],
)
def test_disabled_plugin_is_never_imported(
    venv: Venv, disable: list[str], extra_env: dict[str, str], imported: bool, status: str
) -> None:
    """Blocking the plugin (argument or env) keeps its module out of sys.modules."""
    code = _IMPORTED.format(disable=disable)
    done = venv.run(venv.python, "-c", code, env=extra_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{imported} [{status!r}]"


def test_disable_option_of_the_command_blocks_the_plugin(venv: Venv) -> None:
    """``gpuscout plugins --disable inventory`` reports it disabled with no device."""
    report = _inventory_report(_json(venv.run(venv.gpuscout, "plugins", "--json", "--disable", "inventory")))
    assert (report["status"], report["devices"]) == ("disabled", 0)


def test_example_tests_pass_against_the_installed_plugin(venv: Venv) -> None:
    """The example's own tests, run with pytest from its folder, pass on the installed copy."""
    done = venv.run(
        venv.python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        cwd=venv.example,
        env={"GPUSCOUT_INVENTORY": ""},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
