"""Plant a list of mutations in the rule modules, one at a time, and report which the tests catch.

A mutation is a realistic bug (``<`` for ``<=``, a dropped condition, a wrong constant, a removed
limit check) written as an exact snippet of a module and its replacement, with the test files that
should notice it. The list lives in ``scripts/mutations.py`` (``MUTATIONS``).

How a run goes:

1. The committed tree (``git archive HEAD``; with ``--worktree`` the working tree's tracked and
   untracked, not ignored files, so new tests count) is copied into a temporary folder, once per
   job. In each copy ``core/plugins`` links to ``../plugins`` and ``pkg/gpuscout`` to the copy's
   ``core``, so ``PYTHONPATH=pkg`` imports the copy, not the installed package.
2. Every set of test files named by a mutation runs once unmutated; a set that fails marks its
   mutations "baseline" (not counted).
3. For each mutation: the snippet must occur exactly once in its module, else "stale" (the code
   moved). The module is written mutated, ``python -m pytest -q -x -p no:randomly <tests>`` (with
   ``-n 0`` where pytest-xdist is loaded; a test name may be a glob) runs in the copy under
   ``--timeout``, and the module is restored. Exit status 1 is "caught", 0
   "survived", a timeout "timeout" (counted as caught, listed apart), anything else (a collection
   error, no tests) "broken" (not counted). The mutation list's own consistency test
   (``CONSISTENCY_TESTS``) never runs there, named or inside a folder: it fails whenever a
   snippet is missing from its module, so it would "catch" any mutant of a listed line before a
   behavioural test ran; a catch counts only when a behavioural test fails.

Output: one line per mutation, then caught/total per module and overall. Exit status 0 (a report),
or 1 with ``--fail-under PCT`` when the overall figure is below PCT; 64 on bad usage.

    python scripts/mutate.py --worktree --jobs 2 --json mutation.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fnmatch
import importlib.util
import io
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
COUNTED = ("caught", "timeout", "survived")
#: Tests that check the mutation list against the source, not behaviour: left out of every run.
CONSISTENCY_TESTS = ("tests/test_mutate_script.py",)


class Mutation(NamedTuple):
    """One planted bug: ``original`` (occurring exactly once in ``path``) becomes ``replacement``."""

    path: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    description: str


@dataclass
class Outcome:
    """What became of one mutation."""

    id: str
    path: str
    description: str
    status: str  # caught, survived, timeout, stale, broken, baseline
    seconds: float = 0.0
    detail: str = ""


@dataclass
class Report:
    """Every outcome, with totals per module and overall."""

    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def modules(self) -> dict[str, dict[str, int]]:
        """Per module path: how many mutations ended in each status."""
        table: dict[str, dict[str, int]] = {}
        for outcome in self.outcomes:
            row = table.setdefault(outcome.path, {})
            row[outcome.status] = row.get(outcome.status, 0) + 1
        return dict(sorted(table.items()))

    def figure(self) -> tuple[int, int]:
        """(caught including timeouts, counted mutations)."""
        caught = sum(o.status in ("caught", "timeout") for o in self.outcomes)
        counted = sum(o.status in COUNTED for o in self.outcomes)
        return caught, counted


def load_mutations(path: Path) -> list[tuple[str, Mutation]]:
    """The ``MUTATIONS`` of the data module at ``path``, each with its id (``module:n``)."""
    spec = importlib.util.spec_from_file_location("_gpuscout_mutations", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"mutate: cannot load the mutation list {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    numbered: dict[str, int] = {}
    out = []
    for n, raw in enumerate(module.MUTATIONS):
        mutation = Mutation(*raw)
        bad = [t for t in mutation.tests if not isinstance(t, str)]
        if bad or not all(isinstance(s, str) for s in mutation[:3]):
            raise SystemExit(
                f"mutate: {path}: MUTATIONS[{n}] ({mutation.path!r:.60}): path, snippets and "
                f"each test must be a str, got {bad[0]!r:.80}"
                if bad
                else f"mutate: {path}: MUTATIONS[{n}]: path, original and replacement must be str"
            )
        stem = mutation.path.removesuffix(".py")
        for prefix in ("core/", "plugins/"):
            stem = stem.removeprefix(prefix)
        stem = stem.removesuffix("/__init__")
        numbered[stem] = numbered.get(stem, 0) + 1
        out.append(
            (
                f"{stem}:{numbered[stem]}",
                Mutation(
                    mutation.path,
                    mutation.original,
                    mutation.replacement,
                    tuple(mutation.tests),
                    mutation.description,
                ),
            )
        )
    return out


def select(mutations: list[tuple[str, Mutation]], patterns: Sequence[str]) -> list[tuple[str, Mutation]]:
    """The mutations that one of ``patterns`` names: a glob over ids or paths (``merge:*``), else
    an id (``merge:3``), a module (``merge``, all its ids) or part of a path (``core/fit``)."""
    if not patterns:
        return mutations

    def hit(key: str, mutation: Mutation) -> bool:
        for p in patterns:
            if any(c in p for c in "*?["):
                if fnmatch.fnmatch(key, p) or fnmatch.fnmatch(mutation.path, p):
                    return True
            elif key == p or key.rpartition(":")[0] == p or p in mutation.path:
                return True
        return False

    return [(key, m) for key, m in mutations if hit(key, m)]


def copy_tree(repo: Path, dest: Path, worktree: bool) -> None:
    """Copy the committed tree (or the working tree's files git does not ignore) into ``dest``."""
    dest.mkdir(parents=True)
    if worktree:
        names = (
            subprocess.run(
                ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=repo,
                check=True,
                capture_output=True,
            )
            .stdout.decode()
            .split("\0")
        )
        for name in filter(None, names):
            source = repo / name
            if source.is_file() and not source.is_symlink():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest / name)
    else:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", "HEAD"], cwd=repo, check=True, capture_output=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")


def prepare(repo: Path, root: Path, worktree: bool, package: str) -> Path:
    """One working copy under ``root``: the tree in ``root/tree``, the package link in ``root/pkg``."""
    tree = root / "tree"
    copy_tree(repo, tree, worktree)
    plugins = tree / "core" / "plugins"
    if (tree / "plugins").is_dir() and not plugins.exists():
        plugins.symlink_to(Path("..") / "plugins")
    (root / "pkg").mkdir()
    (root / "pkg" / package).symlink_to(tree / "core")
    return tree


def has_xdist(python: str) -> bool:
    """Whether ``python``'s pytest loads pytest-xdist, whose ``-n 0`` then keeps each run in one
    process (not loaded when PYTEST_DISABLE_PLUGIN_AUTOLOAD is set)."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return subprocess.run([python, "-c", "import xdist"], capture_output=True).returncode == 0


def run_tests(
    python: str, tree: Path, tests: Sequence[str], timeout: float, serial: Sequence[str] = ()
) -> tuple[str, float, str]:
    """Run ``tests`` in ``tree``: ("pass"|"fail"|"timeout"|"error:N", seconds, last output line).

    ``serial``: options that turn off a parallel runner the project's addopts may ask for
    (workers cost more than they save on one file, and ``-x`` stops soonest in one process)."""
    env = {**os.environ, "PYTHONPATH": str(tree.parent / "pkg"), "PYTHONDONTWRITEBYTECODE": "1"}
    # A glob (tests/test_rules_*.py) names whatever files the copy holds, new ones included.
    files = [
        name
        for pattern in tests
        for name in (
            sorted(str(p.relative_to(tree)) for p in tree.glob(pattern))
            if any(c in pattern for c in "*?[")
            else [pattern]
        )
    ]
    # Named or inside a named folder, the list's consistency test would fail for every mutant of
    # a listed line: a catch must come from a behavioural test.
    files = [name for name in files if Path(name).as_posix() not in CONSISTENCY_TESTS]
    if not files:
        return "error:no behavioural tests", 0.0, f"only {', '.join(tests)}"
    ignored = [f"--ignore={name}" for name in CONSISTENCY_TESTS]
    command = [python, "-m", "pytest", "-q", "-x", "-p", "no:randomly", *serial, *ignored, *files]
    start = time.monotonic()
    # A session of its own, so a timeout ends the test's children (workers, servers) too.
    proc = subprocess.Popen(
        command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", time.monotonic() - start, ""
    seconds = time.monotonic() - start
    lines = [line for line in output.decode(errors="replace").splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    status = {0: "pass", 1: "fail"}.get(proc.returncode, f"error:{proc.returncode}")
    return status, seconds, last


def mutate_one(
    python: str, tree: Path, key: str, mutation: Mutation, timeout: float, serial: Sequence[str] = ()
) -> Outcome:
    """Plant ``mutation`` in ``tree``, run its tests, restore the module."""
    outcome = Outcome(key, mutation.path, mutation.description, "stale")
    target = tree / mutation.path
    if not target.is_file():
        outcome.detail = "module not found"
        return outcome
    original = target.read_text()
    count = original.count(mutation.original)
    if count != 1:
        outcome.detail = f"snippet occurs {count} times"
        return outcome
    mutated = original.replace(mutation.original, mutation.replacement)
    try:
        compile(mutated, str(target), "exec")
    except SyntaxError as exc:
        outcome.status, outcome.detail = "broken", f"syntax error: {exc.msg} line {exc.lineno}"
        return outcome
    try:
        target.write_text(mutated)
        status, outcome.seconds, last = run_tests(python, tree, mutation.tests, timeout, serial)
    finally:
        target.write_text(original)
    outcome.status = {"fail": "caught", "pass": "survived", "timeout": "timeout"}.get(status, "broken")
    outcome.detail = last if outcome.status != "broken" else f"pytest {status}: {last}"
    return outcome


def run(
    repo: Path,
    mutations: list[tuple[str, Mutation]],
    *,
    python: str,
    jobs: int,
    timeout: float,
    worktree: bool,
    package: str = "gpuscout",
    echo: Any = None,
) -> Report:
    """Plant every mutation in working copies of ``repo`` and collect the outcomes in list order."""
    report = Report()
    start = time.monotonic()
    serial = ("-n", "0") if has_xdist(python) else ()
    with tempfile.TemporaryDirectory(prefix="gpuscout-mutate-") as scratch:
        copies: queue.Queue[Path] = queue.Queue()
        for n in range(max(1, jobs)):
            copies.put(prepare(repo, Path(scratch) / f"copy{n}", worktree, package))

        def with_copy(fn: Any, *args: Any) -> Any:
            tree = copies.get()
            try:
                return fn(tree, *args)
            finally:
                copies.put(tree)

        suites = sorted({m.tests for _, m in mutations})
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            baseline = dict(
                zip(
                    suites,
                    pool.map(
                        lambda tests: with_copy(
                            lambda tree: run_tests(python, tree, tests, timeout * 2, serial)
                        ),
                        suites,
                    ),
                    strict=True,
                )
            )
            for tests, (status, seconds, last) in baseline.items():
                if status != "pass" and echo:
                    echo(f"baseline fails ({status}, {seconds:.0f}s): {' '.join(tests)}: {last}")

            def one(item: tuple[str, Mutation]) -> Outcome:
                key, mutation = item
                status, _, last = baseline[mutation.tests]
                if status != "pass":
                    return Outcome(
                        key,
                        mutation.path,
                        mutation.description,
                        "baseline",
                        detail=f"unmutated tests {status}: {last}",
                    )
                done: Outcome = with_copy(
                    lambda tree: mutate_one(python, tree, key, mutation, timeout, serial)
                )
                return done

            for outcome in pool.map(one, mutations):
                report.outcomes.append(outcome)
                if echo:
                    echo(format_outcome(outcome))
    report.seconds = time.monotonic() - start
    return report


def format_outcome(outcome: Outcome) -> str:
    """One line: status, id, description (and why, when it was not run or is broken)."""
    line = f"{outcome.status:<9} {outcome.id:<24} {outcome.description}"
    if outcome.status in ("stale", "broken", "baseline"):
        line += f"  [{outcome.detail}]"
    return line


def summary(report: Report) -> list[str]:
    """The totals: caught/counted per module (with what was not counted), then overall."""
    lines = ["", "per module (caught incl. timeouts / counted):"]
    for path, row in report.modules().items():
        caught = row.get("caught", 0) + row.get("timeout", 0)
        counted = sum(row.get(s, 0) for s in COUNTED)
        extra = ", ".join(f"{row[s]} {s}" for s in ("timeout", "stale", "broken", "baseline") if row.get(s))
        lines.append(f"  {path:<40} {caught:>3}/{counted}" + (f"  ({extra})" if extra else ""))
    caught, counted = report.figure()
    pct = 100.0 * caught / counted if counted else 0.0
    lines.append(f"overall: {caught}/{counted} caught ({pct:.1f} %) in {report.seconds:.0f}s")
    return lines


def as_json(report: Report) -> dict[str, Any]:
    """The report as plain data for ``--json``."""
    caught, counted = report.figure()
    return {
        "caught": caught,
        "counted": counted,
        "percent": round(100.0 * caught / counted, 1) if counted else 0.0,
        "seconds": round(report.seconds, 1),
        "modules": report.modules(),
        "outcomes": [asdict(o) for o in report.outcomes],
    }


def main(argv: Iterable[str] | None = None) -> int:
    """Parse the options, run the mutations, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only mutations whose id or path matches (glob or substring); repeatable",
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutations run at once (default 1)")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per mutation's test run (default 300)"
    )
    parser.add_argument(
        "--worktree",
        action="store_true",
        help="copy the working tree (uncommitted files too) instead of HEAD",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the report as JSON")
    parser.add_argument(
        "--fail-under", type=float, metavar="PCT", help="exit 1 when the overall figure is below PCT"
    )
    parser.add_argument("--list", action="store_true", help="print the mutations and exit")
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    parser.add_argument("--mutations", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--package", default="gpuscout", help=argparse.SUPPRESS)
    parser.add_argument("--python", default=sys.executable, help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.jobs < 1 or args.timeout <= 0:
        parser.print_usage(sys.stderr)
        print("mutate: --jobs must be at least 1 and --timeout positive", file=sys.stderr)
        return 64
    listed = select(load_mutations(args.mutations or Path(__file__).with_name("mutations.py")), args.only)
    if not listed:
        print(f"mutate: no mutation matches {args.only}", file=sys.stderr)
        return 64
    if args.list:
        for key, mutation in listed:
            print(f"{key:<24} {mutation.path}: {mutation.description}")
        return 0
    report = run(
        args.repo.resolve(),
        listed,
        python=args.python,
        jobs=args.jobs,
        timeout=args.timeout,
        worktree=args.worktree,
        package=args.package,
        echo=lambda s: print(s, flush=True),
    )
    for line in summary(report):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(as_json(report), indent=2) + "\n")
    caught, counted = report.figure()
    if args.fail_under is not None and (not counted or 100.0 * caught / counted < args.fail_under):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
