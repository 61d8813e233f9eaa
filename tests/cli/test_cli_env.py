"""`gpuscout env`: formats, isolation and user-set visibility variables over injected devices,
and `--verify` against a real child (lavapipe, and a child that sees something else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from gpuscout import DeviceInfo
from gpuscout.sizes import GIB
from gpuscout.testing import CliRunner

CUDA_A = DeviceInfo(
    id="GPU-aaaa1111",
    library="CUDA",
    filter_id="GPU-aaaa1111",
    uuid="GPU-aaaa1111",
    pci_id="0000:01:00.0",
    free_memory=40 * GIB,
)
CUDA_B = DeviceInfo(
    id="GPU-bbbb2222",
    library="CUDA",
    filter_id="GPU-bbbb2222",
    uuid="GPU-bbbb2222",
    pci_id="0000:02:00.0",
    free_memory=30 * GIB,
)
CUDA_IDX = DeviceInfo(id="1", library="CUDA", filter_id="1", pci_id="0000:03:00.0", free_memory=20 * GIB)
MIG = DeviceInfo(
    id="MIG-cccc3333", library="CUDA", filter_id="MIG-cccc3333", uuid="MIG-cccc3333", free_memory=10 * GIB
)
ROCM_A = DeviceInfo(
    id="GPU-5f3c0a1b",
    library="ROCm",
    filter_id="GPU-5f3c0a1b",
    uuid="GPU-5f3c0a1b",
    pci_id="0000:c4:00.0",
    free_memory=60 * GIB,
)
ROCM_B = DeviceInfo(
    id="GPU-6e4d0a1b",
    library="ROCm",
    filter_id="GPU-6e4d0a1b",
    uuid="GPU-6e4d0a1b",
    pci_id="0000:c5:00.0",
    free_memory=50 * GIB,
)
VK_A = DeviceInfo(
    id="0",
    library="Vulkan",
    description="Intel Arc",
    filter_id="2",
    pci_id="0000:00:02.0",
    integrated=True,
    free_memory=8 * GIB,
)
VK_B = DeviceInfo(
    id="1",
    library="Vulkan",
    description="Other",
    filter_id="0",
    pci_id="0000:00:03.0",
    integrated=True,
    free_memory=4 * GIB,
)
MIXED = [CUDA_A, CUDA_B, ROCM_A, ROCM_B, VK_A, VK_B]


def env_json(
    cli: CliRunner, devices: list[DeviceInfo], *args: str, env: dict[str, str] | None = None
) -> dict[str, str]:
    """What `env --format json ARGS` prints over ``devices``, which must exit 0."""
    run = cli(["env", "--format", "json", *args], devices, env=env)
    assert run.code == 0, run.err
    data: dict[str, str] = run.json()
    return data


TABLE: list[tuple[str, list[DeviceInfo], dict[str, str], list[str], dict[str, str]]] = [
    ("one CUDA device by UUID", MIXED, {}, ["GPU-bbbb"], {"CUDA_VISIBLE_DEVICES": "GPU-bbbb2222"}),
    (
        "all CUDA devices in rank order",
        MIXED,
        {},
        ["library=cuda"],
        {"CUDA_VISIBLE_DEVICES": "GPU-aaaa1111,GPU-bbbb2222"},
    ),
    ("a MIG instance by its UUID", [CUDA_A, MIG], {}, ["MIG-cccc"], {"CUDA_VISIBLE_DEVICES": "MIG-cccc3333"}),
    (
        "a user-set CUDA list is replaced",
        MIXED,
        {"CUDA_VISIBLE_DEVICES": "3,2"},
        ["cuda:1"],
        {"CUDA_VISIBLE_DEVICES": "GPU-bbbb2222"},
    ),
    (
        "ROCm selection uses ROCR with UUIDs",
        MIXED,
        {},
        ["library=rocm"],
        {"ROCR_VISIBLE_DEVICES": "GPU-5f3c0a1b,GPU-6e4d0a1b"},
    ),
    (
        "a user-set numeric HIP list gets the child's ordinals",
        MIXED,
        {"HIP_VISIBLE_DEVICES": "1,0"},
        ["rocm:1"],
        {"ROCR_VISIBLE_DEVICES": "GPU-6e4d0a1b", "HIP_VISIBLE_DEVICES": "0"},
    ),
    (
        "a user-set ROCR list gives the inherited HIP list the child's ordinal",
        MIXED,
        {"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"},
        ["rocm:0"],
        {"ROCR_VISIBLE_DEVICES": "GPU-5f3c0a1b", "HIP_VISIBLE_DEVICES": "0"},
    ),
    (
        "a mixed CUDA and ROCm selection leaves CUDA unfiltered",
        MIXED,
        {},
        ["cuda:0", "rocm:0"],
        {"ROCR_VISIBLE_DEVICES": "GPU-5f3c0a1b"},
    ),
    ("one Vulkan device by its raw index", MIXED, {}, ["vulkan:1"], {"GGML_VK_VISIBLE_DEVICES": "0"}),
    ("two Vulkan devices are not filtered", MIXED, {}, ["library=vulkan"], {}),
    (
        "all on a mixed machine filters only ROCm",
        MIXED,
        {},
        ["all"],
        {"ROCR_VISIBLE_DEVICES": "GPU-5f3c0a1b,GPU-6e4d0a1b"},
    ),
]


@pytest.mark.parametrize(
    ("devices", "user_env", "selectors", "expected"), [c[1:] for c in TABLE], ids=[c[0] for c in TABLE]
)
def test_env_prints_the_selection_environment(
    gpuscout_cli: CliRunner,
    devices: list[DeviceInfo],
    user_env: dict[str, str],
    selectors: list[str],
    expected: dict[str, str],
) -> None:
    """`env --format json` prints exactly the variables the vendor rules give the selection."""
    assert env_json(gpuscout_cli, devices, *selectors, env=user_env) == expected


ISOLATED: list[tuple[str, list[DeviceInfo], dict[str, str], list[str], dict[str, str]]] = [
    (
        "CUDA selected hides ROCm (ROCR empty, HIP -1) and Vulkan",
        MIXED,
        {},
        ["cuda:0"],
        {
            "CUDA_VISIBLE_DEVICES": "GPU-aaaa1111",
            "ROCR_VISIBLE_DEVICES": "",
            "HIP_VISIBLE_DEVICES": "-1",
            "GGML_VK_VISIBLE_DEVICES": "",
        },
    ),
    (
        "ROCm selected hides CUDA with an empty list",
        MIXED,
        {},
        ["rocm:0"],
        {"ROCR_VISIBLE_DEVICES": "GPU-5f3c0a1b", "CUDA_VISIBLE_DEVICES": "", "GGML_VK_VISIBLE_DEVICES": ""},
    ),
    (
        "Vulkan selected hides CUDA and ROCm",
        MIXED,
        {"ROCR_VISIBLE_DEVICES": "0"},
        ["vulkan:0"],
        {
            "GGML_VK_VISIBLE_DEVICES": "2",
            "CUDA_VISIBLE_DEVICES": "",
            "ROCR_VISIBLE_DEVICES": "",
            "HIP_VISIBLE_DEVICES": "-1",
        },
    ),
    (
        "a CUDA index sets CUDA_DEVICE_ORDER",
        [CUDA_IDX, ROCM_A],
        {},
        ["cuda:0"],
        {
            "CUDA_VISIBLE_DEVICES": "1",
            "ROCR_VISIBLE_DEVICES": "",
            "HIP_VISIBLE_DEVICES": "-1",
            "GGML_VK_VISIBLE_DEVICES": "",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        },
    ),
    (
        "with CUDA_VISIBLE_DEVICES exported the ROCm ordinal goes to HIP and CUDA is hidden",
        MIXED,
        {"CUDA_VISIBLE_DEVICES": "0"},
        ["rocm:1"],
        {
            "ROCR_VISIBLE_DEVICES": "GPU-6e4d0a1b",
            "HIP_VISIBLE_DEVICES": "0",
            "CUDA_VISIBLE_DEVICES": "",
            "GGML_VK_VISIBLE_DEVICES": "",
        },
    ),
]


@pytest.mark.parametrize(
    ("devices", "user_env", "selectors", "expected"), [c[1:] for c in ISOLATED], ids=[c[0] for c in ISOLATED]
)
def test_isolate_hides_every_other_vendor(
    gpuscout_cli: CliRunner,
    devices: list[DeviceInfo],
    user_env: dict[str, str],
    selectors: list[str],
    expected: dict[str, str],
) -> None:
    """`env --isolate` adds each unselected vendor's real hide-all values."""
    assert env_json(gpuscout_cli, devices, "--isolate", *selectors, env=user_env) == expected


def test_isolate_hides_cuda_for_a_radeon_when_cuda_visible_devices_is_exported(
    gpuscout_cli: CliRunner,
) -> None:
    """With CUDA_VISIBLE_DEVICES=0 exported, the Radeon's ordinal goes to HIP_VISIBLE_DEVICES
    (which HIP reads first), so --isolate can set CUDA_VISIBLE_DEVICES= and hide the NVIDIA
    GPU: no "cannot hide" warning (it used to write the ordinal into CUDA's variable)."""
    run = gpuscout_cli(
        ["env", "--isolate", "--format", "json", "rocm:0"], MIXED, env={"CUDA_VISIBLE_DEVICES": "0"}
    )
    assert run.code == 0, run.err
    assert "cannot hide" not in run.err
    chosen = json.loads(run.out)
    assert (chosen["CUDA_VISIBLE_DEVICES"], chosen["HIP_VISIBLE_DEVICES"]) == ("", "0")


def test_sh_format_prints_single_quoted_export_lines(gpuscout_cli: CliRunner) -> None:
    """The default format is `export K='V'` lines."""
    run = gpuscout_cli(["env", "--isolate", "cuda:0"], MIXED)
    assert run.code == 0, run.err
    assert run.out == (
        "export CUDA_VISIBLE_DEVICES='GPU-aaaa1111'\n"
        "export ROCR_VISIBLE_DEVICES=''\n"
        "export HIP_VISIBLE_DEVICES='-1'\n"
        "export GGML_VK_VISIBLE_DEVICES=''\n"
    )


def test_sh_format_survives_eval_for_awkward_values(gpuscout_cli: CliRunner) -> None:
    """`eval` in a real shell gives back values with quotes, spaces, `$` and newlines intact."""
    awkward = 'it\'s $HOME `x` "q"\nline2'
    run = gpuscout_cli(["env", "best"], [CUDA_A.evolve(runner_env_overrides={"AWKWARD": awkward})])
    assert run.code == 0, run.err
    script = run.out
    shown = subprocess.run(
        ["sh", "-c", 'eval "$1"; printf %s "$AWKWARD"', "sh", script],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == awkward


def test_dotenv_format_prints_plain_and_quoted_values(gpuscout_cli: CliRunner) -> None:
    """dotenv writes simple values bare (empty included) and single-quotes the rest."""
    noted = CUDA_A.evolve(runner_env_overrides={"NOTE": 'a "b"'})
    run = gpuscout_cli(["env", "--format", "dotenv", "--isolate", "best"], [noted])
    assert run.code == 0, run.err
    assert run.out == (
        "CUDA_VISIBLE_DEVICES=GPU-aaaa1111\n"
        "NOTE='a \"b\"'\n"
        "ROCR_VISIBLE_DEVICES=\n"
        "HIP_VISIBLE_DEVICES=-1\n"
        "GGML_VK_VISIBLE_DEVICES=\n"
    )


def test_env_without_selectors_selects_all(gpuscout_cli: CliRunner) -> None:
    """No selector means `all`."""
    assert env_json(gpuscout_cli, [CUDA_A, CUDA_B]) == {"CUDA_VISIBLE_DEVICES": "GPU-aaaa1111,GPU-bbbb2222"}


def test_empty_selection_prints_nothing_and_exits_1(gpuscout_cli: CliRunner) -> None:
    """`all` on a machine without devices prints nothing and exits 1, as a selector that matches nothing."""
    run = gpuscout_cli(["env", "all"])
    assert run.code == 1, run.err
    assert run.out == ""


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("nope", "unknown selector 'nope'"),
        ("fits:24", "selector 'fits:24': '24': a size needs a unit, e.g. 24GiB or 24MiB; bytes are 24B"),
        ("GPU-", "is ambiguous"),
    ],
)
def test_bad_selector_exits_2_with_one_line(gpuscout_cli: CliRunner, selector: str, message: str) -> None:
    """A bad selector is exit 2, one `gpuscout: error:` line on stderr, nothing on stdout."""
    code, out, err = gpuscout_cli(["env", selector], MIXED)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("gpuscout: error: ")
    assert message in err


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("metal:0", "no device of library 'metal'"),
        ("fits:1TiB", "no device has 1TiB (1024.00 GiB)"),
        ("GPU-dead", "no device id or UUID equals or starts with it"),
    ],
)
def test_selector_matching_nothing_exits_1_with_one_line(
    gpuscout_cli: CliRunner, selector: str, message: str
) -> None:
    """A well-formed selector that matches no device is exit 1, one line on stderr."""
    code, out, err = gpuscout_cli(["env", selector], MIXED)
    assert code == 1
    assert out == "" and err.count("\n") == 1 and message in err


# -- --verify -----------------------------------------------------------------------------------


def test_the_verify_child_gets_the_scout_options_given(tmp_path: Any) -> None:
    """The child's command line repeats the scout options that differ from their defaults."""
    from gpuscout.cli import build_parser
    from gpuscout.cli._common import scout_argv

    parser, _ = build_parser("env")
    given = ["--plugins", "cuda,vulkan", "--disable", "rocm", "--root", str(tmp_path), "--timeout", "2.5"]
    assert scout_argv(parser.parse_args(["env", *given])) == given
    assert scout_argv(parser.parse_args(["env", "--root", "/", "--timeout", "15"])) == []


def test_verify_mismatch_exits_3_with_a_report_and_no_environment(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real child that sees another device makes `env --verify` exit 3, printing no env."""
    from gpuscout._records import encode as wire
    from gpuscout._selection import verify

    seen = json.dumps({"devices": wire.unstructure([CUDA_B])})
    monkeypatch.setattr(verify, "child_command", lambda *a: [sys.executable, "-c", f"print({seen!r})"])
    code, out, err = gpuscout_cli(["env", "--verify", "cuda:0"], MIXED)
    assert code == 3
    assert out == ""
    assert "MISMATCH" in err
    assert "selected but not seen: S0=CUDA (GPU-aaaa1111, 0000:01:00.0)" in err
    assert "seen but not selected: C0=CUDA (GPU-bbbb2222, 0000:02:00.0)" in err


def test_verify_child_failure_exits_3(gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verification child that crashes is a failed verification (exit 3) with its reason."""
    from gpuscout._selection import verify

    monkeypatch.setattr(
        verify, "child_command", lambda *a: [sys.executable, "-c", "import sys; sys.exit('driver exploded')"]
    )
    run = gpuscout_cli(["env", "--verify", "cuda:0"], MIXED)
    assert run.code == 3, run.err
    assert "exited with status 1: driver exploded" in run.err


def test_verify_child_gets_the_selection_environment(
    gpuscout_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verification child runs with the computed variables added to the environment."""
    from gpuscout._records import encode as wire
    from gpuscout._selection import verify

    # The child answers with the device named by its own CUDA_VISIBLE_DEVICES, if KEEP_ME came too.
    doc = {"devices": wire.unstructure([CUDA_A, CUDA_B])}
    code = (
        "import json, os\n"
        f"doc = {doc!r}\n"
        "doc['devices'] = [d for d in doc['devices'] if d['id'] == "
        "os.environ.get('CUDA_VISIBLE_DEVICES') and os.environ.get('KEEP_ME') == 'yes']\n"
        "print(json.dumps(doc))\n"
    )
    monkeypatch.setattr(verify, "child_command", lambda *a: [sys.executable, "-c", code])
    status, out, err = gpuscout_cli(["env", "--verify", "cuda:1"], MIXED, env={"KEEP_ME": "yes"})
    assert status == 0
    assert out == "export CUDA_VISIBLE_DEVICES='GPU-bbbb2222'\n"
    assert "verified: the child sees exactly the 1 selected device: " in err


@pytest.mark.parametrize(
    ("selected", "seen", "ok"),
    [
        ([CUDA_A], [CUDA_A.evolve(id="other-id", filter_id="x")], True),  # UUID decides
        ([VK_A], [VK_A.evolve(id="7", uuid="")], True),  # PCI id decides
        ([VK_A.evolve(pci_id="")], [VK_A.evolve(id="5", pci_id="")], True),  # (library, filter id)
        ([VK_A.evolve(pci_id="")], [VK_B.evolve(pci_id="")], False),
        ([CUDA_A], [CUDA_A, CUDA_B], False),
        ([], [], True),
    ],
)
def test_compare_views_matches_by_uuid_then_pci_then_filter_id(
    selected: list[DeviceInfo], seen: list[DeviceInfo], ok: bool
) -> None:
    """Devices are the same across processes by UUID, PCI id, or library and filter id."""
    from gpuscout._selection.verify import compare_views

    assert compare_views(selected, seen).ok is ok


def gpuscout(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscout", *args], capture_output=True, text=True, timeout=120, env=env
    )


def llvmpipe_selector(env: dict[str, str]) -> str:
    """A UUID prefix of the lavapipe device as the real Vulkan plugin reports it."""
    out = gpuscout("list", "--json", "--include-software", "--plugins", "vulkan", env=env)
    devices: list[dict[str, Any]] = json.loads(out.stdout)["devices"]
    soft = [d for d in devices if d.get("software") and "llvmpipe" in d["name"]]
    if not soft:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the Vulkan plugin found no llvmpipe device: {out.stdout}{out.stderr}")
        pytest.skip("the Vulkan plugin found no llvmpipe device")
    return str(soft[0]["uuid"])[:8]


def test_verify_with_lavapipe_sees_the_selected_software_device(lavapipe_env: dict[str, str]) -> None:
    """`env --verify --include-software` on llvmpipe: a real child sees exactly that device."""
    env = lavapipe_env
    selector = llvmpipe_selector(env)
    out = gpuscout("env", "--verify", "--include-software", "--plugins", "vulkan", selector, env=env)
    assert out.returncode == 0, out.stderr
    assert "verified: the child sees exactly the 1 selected device: " in out.stderr
    assert out.stdout.startswith("export GGML_VK_VISIBLE_DEVICES='")
