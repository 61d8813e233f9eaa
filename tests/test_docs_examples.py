"""Docs that cannot drift: every command and Python snippet README.md and docs/*.md show is run.

The machine they run on is a test plugin installed through entry points into a temporary site
(``write_site``), on PYTHONPATH, that reports two CUDA cards and one ROCm card: fake, but each
honours its vendor's visibility variable, and the built-in plugins' rules, selectors and
visibility variables apply to them, next to whatever the built-in plugins find here. Each
snippet runs in a fresh interpreter.

- A fenced ```` ```python ```` block runs as a script; it passes when it exits 0.
- A fenced ```` ```sh ```` block: each line that starts with ``gpuscout ``, ``python -m gpuscout``
  or ``eval "$(gpuscout`` runs in ``sh -c`` with the venv's ``gpuscout`` first on PATH; other
  lines (``pip install``, ``mkdir``) are not run. A line passes when it exits 0, or with the code
  its comment documents (``exit 3 on a mismatch``). For an ``eval "$(gpuscout ...)"`` line the
  inner command's exit code is the one checked, then the ``eval`` runs. An optional flag in
  brackets (``gpuscout plugins [--json]``) runs both without and with it.
- Skipped, by rule, not by list: a line whose command part (before its ``  #`` comment) holds a
  placeholder (a word in capitals such as ``N``, ``DIR``, ``SIZE``; ``...`` or ``…``; a file that
  stands for the reader's own, ``train.py`` or ``MODEL.gguf``), and a line whose subcommand
  ``gpuscout --help`` does not list.
- A line that names the Vulkan library (``library=vulkan``) needs a Vulkan device: it runs with
  the loader pinned to Mesa's lavapipe, and is skipped where lavapipe is missing (a failure under
  CI=true, tests/conftest.py ``require``).
- A block the docs mark with ``<!-- not run: REASON -->`` on the line before its fence (a
  fragment, or something that needs hardware or a distribution the reader builds) is not run;
  the reason is required and checked here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import attrs
import pytest

from tests.conftest import write_site

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(.*?)\s*-->\s*$")
MARKER_ANY = re.compile(r"<!--\s*not run")
RUNNABLE = re.compile(r'^(gpuscout |python -m gpuscout|eval "\$\(gpuscout )')
COMMENT = re.compile(r"\s+#(\s.*)?$")
PLACEHOLDER = re.compile(r"\b[A-Z]{1,8}\b|\.\.\.|…|\btrain\.py\b|\bMODEL\.gguf\b")
OPTIONAL = re.compile(r"\s\[(--[\w-]+)\]")
DOCUMENTED_EXIT = re.compile(r"\bexit (\d+)\b")
NEEDS_VULKAN = re.compile(r"\bvulkan\b", re.IGNORECASE)
#: Seconds one snippet may take (a discovery with --validate starts a child per device).
SNIPPET_TIMEOUT = 60

FAKE_PLUGIN = '''
from gpuscout.plugin import DeviceInfo, hookimpl

GPUSCOUT_API_VERSION = 1
GIB = 1 << 30


def visible(devices, env, names):
    """What the vendor runtime would show: the ids, id prefixes or positions its variable lists."""
    name = next((n for n in names if n in env), None)
    if name is None:
        return devices
    tokens = [t.strip() for t in env[name].split(",") if t.strip()]
    return [d for i, d in enumerate(devices)
            if any(t == str(i) or t == d.filter_id or d.id.startswith(t) for t in tokens)]


@hookimpl
def gpuscout_enumerate(context):
    cuda, rocm = CARDS[:2], CARDS[2:]
    return (visible(cuda, context.env, ["CUDA_VISIBLE_DEVICES"])
            + visible(rocm, context.env, ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]))


CARDS = [
    DeviceInfo(id="GPU-d0c50000-0000-0000-0000-000000000000", filter_id="GPU-d0c5",
               library="CUDA", name="CUDA0", description="Docs Card 80", pci_id="0000:01:00.0",
               total_memory=80 * GIB, free_memory=70 * GIB, compute_major=9,
               driver_major=12, driver_minor=4),
    DeviceInfo(id="GPU-d0c51111-0000-0000-0000-000000000000", filter_id="GPU-d0c51",
               library="CUDA", name="CUDA1", description="Docs Card 24", pci_id="0000:02:00.0",
               total_memory=24 * GIB, free_memory=23 * GIB, compute_major=8, compute_minor=9,
               driver_major=12, driver_minor=4),
    DeviceInfo(id="GPU-0123456789abcdef", filter_id="0", library="ROCm", name="ROCm0",
               description="Docs Card R", pci_id="0000:c4:00.0", total_memory=24 * GIB,
               free_memory=20 * GIB, gfx_target="gfx1100"),
]
'''


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    not_run: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> Iterator[Block]:
    lines = doc.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(2):
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^{indent}```\s*$", lines[i]):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marked = NOT_RUN.match(before)
        yield Block(doc, start + 1, lang, "\n".join(body) + "\n", marked.group(1) if marked else None)
        i += 1


ALL = [b for doc in DOCS for b in blocks(doc)]
PYTHON = [b for b in ALL if b.lang == "python"]
SHELL = [b for b in ALL if b.lang == "sh"]


@dataclass(frozen=True)
class Command:
    block: Block
    line: str  # as the doc shows it
    command: str  # what runs: the command part, an optional flag expanded or not
    codes: frozenset[int]


def commands() -> Iterator[Command]:
    for b in SHELL:
        if b.not_run is not None:
            continue
        for line in b.text.splitlines():
            line = line.strip()
            if not RUNNABLE.match(line):
                continue
            command = COMMENT.sub("", line)
            comment = line[len(command) :]
            documented = DOCUMENTED_EXIT.search(comment)
            codes = frozenset({0, int(documented.group(1))} if documented else {0})
            variants = {OPTIONAL.sub("", command), OPTIONAL.sub(r" \1", command)}
            for variant in sorted(variants):
                yield Command(b, line, variant, codes)


ALL_COMMANDS = list(commands())
#: Lines with a placeholder (``N``, ``DIR``, ``...``, ``train.py``) cannot run as shown; they are
#: left out here, not skipped, and ``test_placeholders_are_few_and_named`` keeps them in view.
COMMANDS = [c for c in ALL_COMMANDS if not PLACEHOLDER.search(c.command)]


@pytest.fixture(scope="module")
def docs_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment snippets run in: the fake-cards plugin installed, the venv first."""
    site = write_site(
        tmp_path_factory.mktemp("docs-site"),
        "gpuscout-docs-cards",
        "1.0.0",
        {"gpuscout_docs_cards": FAKE_PLUGIN},
        {"docscards": "gpuscout_docs_cards"},
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GPUSCOUT_") and k not in ("PYTHONPATH", "COVERAGE_PROCESS_START")
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(site)
    return env


@pytest.fixture(scope="module")
def subcommands(docs_env: dict[str, str]) -> frozenset[str]:
    """The commands ``gpuscout --help`` lists, one per line under its ``COMMAND``."""
    out = subprocess.run(
        [str(BIN / "gpuscout"), "--help"],
        env=docs_env,
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT,
    ).stdout
    listed = frozenset(re.findall(r"^ {4}([a-z][\w-]*)\b", out, re.MULTILINE))
    assert {"list", "env"} <= listed, f"gpuscout --help names no commands:\n{out}"
    return listed


def test_the_docs_show_runnable_snippets() -> None:
    """The parser finds the blocks (a broken fence would silently run nothing)."""
    assert len(PYTHON) >= 10 and len(SHELL) >= 4 and len(COMMANDS) >= 8
    assert sum(b.not_run is None for b in PYTHON) >= 8


def test_placeholders_are_few_and_named() -> None:
    """The lines left out for a placeholder are the ones expected (a new one must be added here,
    so that nobody hides a runnable example behind a capital letter)."""
    left_out = sorted({c.command for c in ALL_COMMANDS if PLACEHOLDER.search(c.command)})
    assert left_out == [
        "gpuscout --replay DIR list",  # a recording: tests/test_machines.py replays the zoo
        "gpuscout --replay DIR list --json",
        "gpuscout cluster --ray HOST:PORT",  # needs a Ray cluster: tests/test_cluster_ray.py
        "gpuscout cluster --ray HOST:PORT --json",
        "gpuscout exec --cpu-affinity --device cuda:0 -- python train.py",
        "gpuscout exec --device cuda:1 --isolate -- python train.py",
        "gpuscout exec --fit MODEL.gguf -- llama-server -m MODEL.gguf",  # tests/fit/test_fit_plan.py
        "gpuscout fit MODEL.gguf --ctx 8192",  # a model file: tests/test_fit.py, tests/fit
        "gpuscout fit MODEL.gguf --ctx 8192 --json",
        "gpuscout fit MODEL.gguf --print-args -fitt 1024",
        "gpuscout list --watch [SECONDS]",
        "gpuscout record DIR",  # writes a folder: tests/test_recordings.py records and replays
        "gpuscout record DIR --anonymize",
        "gpuscout runner --port N",
        "python -m gpuscout ...",
    ]


def test_every_not_run_marker_gives_a_reason_and_precedes_a_block() -> None:
    """``<!-- not run: REASON -->`` needs a REASON and must stand right before a fence."""
    marked = {(b.doc, b.line) for b in ALL if b.not_run is not None}
    assert all(b.not_run for b in ALL if b.not_run is not None), "a not-run marker without reason"
    for doc in DOCS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            if MARKER_ANY.search(line):
                assert NOT_RUN.match(line), f"{doc.name}:{n}: write <!-- not run: REASON -->"
                after = next(k for k in range(n, len(lines)) if lines[k].strip()) + 1
                assert (doc, after) in marked, f"{doc.name}:{n}: the marker precedes no block"


@pytest.mark.real_machine
@pytest.mark.parametrize("block", [b for b in PYTHON if b.not_run is None], ids=lambda b: b.where)
def test_python_snippet_runs(block: Block, docs_env: dict[str, str], tmp_path: Path) -> None:
    """The snippet runs as a script in a fresh interpreter, against the fake cards."""
    run = subprocess.run(
        [sys.executable, "-c", block.text],
        env=docs_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT,
    )
    assert run.returncode == 0, f"{block.where} exited {run.returncode}:\n{run.stderr[-3000:]}"


@pytest.mark.real_machine
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.block.where}:{c.command}")
def test_shell_command_runs(
    command: Command,
    docs_env: dict[str, str],
    subcommands: frozenset[str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """The command exits 0 (or with the code its comment documents), with no traceback."""
    shown = command.command
    inner = re.match(r'^eval "\$\((.*)\)"$', shown)
    run_first = inner.group(1) if inner else shown
    words = run_first.split()
    sub = words[1] if words[0] == "gpuscout" else words[3] if len(words) > 3 else ""
    assert sub in subcommands, f"{command.block.where}: the docs show {sub!r}, not a command"
    if NEEDS_VULKAN.search(run_first):
        docs_env = {
            k: v
            for k, v in docs_env.items()
            if k not in ("VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES", "GGML_VK_VISIBLE_DEVICES")
        }
        docs_env["VK_DRIVER_FILES"] = request.getfixturevalue("lavapipe_icd")
    run = subprocess.run(
        ["sh", "-c", run_first],
        env=docs_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT,
    )
    assert run.returncode in command.codes, (
        f"{command.block.where}: {run_first!r} exited {run.returncode}:\n{run.stderr[-3000:]}"
    )
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    if inner:
        evaluated = subprocess.run(
            ["sh", "-c", shown],
            env=docs_env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=SNIPPET_TIMEOUT,
        )
        assert evaluated.returncode == 0, evaluated.stderr[-3000:]


def test_the_readme_names_every_device_key_list_json_can_write() -> None:
    """Each wire key of DeviceInfo is in README.md's `list --json` section, the optional ones too."""
    from gpuscout._records.device import DeviceInfo
    from gpuscout._records.encode import KEYS, NEVER

    text = (ROOT / "README.md").read_text()
    section = text[text.index("`gpuscout list --json` prints:") :][:3000]
    never = NEVER.get(DeviceInfo, frozenset())
    keys = [KEYS[DeviceInfo].get(f.name, f.name) for f in attrs.fields(DeviceInfo) if f.name not in never]
    assert [k for k in keys if f'"{k}"' not in section and f"`{k}`" not in section] == []
