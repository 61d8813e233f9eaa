"""Proof that a child sees what was chosen: run ``python -m gpuscout list --json`` with the
selection's environment and compare the devices it finds with the selection.

Devices are matched by vendor UUID, then PCI id, then (library, filter id): the ids a discovery
gives are only stable within one process, but these three name the same device in any process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence

import attrs

from gpuscout._records.device import DeviceInfo
from gpuscout._selection.selectors import describe
from gpuscout.errors import GpuscoutError

#: Exit status of ``gpuscout env --verify`` / ``exec --verify`` when the child sees something else.
VERIFY_FAILED = 3
DEFAULT_TIMEOUT = 60.0


class VerifyError(GpuscoutError):
    """The verification child could not be run or gave no usable answer."""


@attrs.frozen
class Verdict:
    """What the child saw compared with the selection: ``missing`` were selected but not seen,
    ``extra`` were seen but not selected."""

    selected: tuple[DeviceInfo, ...]
    seen: tuple[DeviceInfo, ...]
    missing: tuple[DeviceInfo, ...]
    extra: tuple[DeviceInfo, ...]

    @property
    def ok(self) -> bool:
        """True when the child sees exactly the selection."""
        return not self.missing and not self.extra


def same_device(a: DeviceInfo, b: DeviceInfo) -> bool:
    """Whether two records from different processes name one device."""
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    if a.pci_id and b.pci_id:
        return a.pci_id.lower() == b.pci_id.lower()
    return a.library.lower() == b.library.lower() and (a.filter_id or a.id) == (b.filter_id or b.id)


def compare_views(selected: Sequence[DeviceInfo], seen: Sequence[DeviceInfo]) -> Verdict:
    """Match the selection against what the child saw."""
    missing = [d for d in selected if not any(same_device(d, s) for s in seen)]
    extra = [s for s in seen if not any(same_device(d, s) for d in selected)]
    return Verdict(tuple(selected), tuple(seen), tuple(missing), tuple(extra))


def report(verdict: Verdict) -> str:
    """A human-readable account of a verdict (several lines, ending in a newline)."""
    if verdict.ok:
        n = len(verdict.selected)
        named = "; ".join(_name(d) for d in verdict.selected)
        count = f"{n} selected device{'' if n == 1 else 's'}"
        return f"gpuscout: verified: the child sees exactly the {count}: {named}\n"
    lines = [
        "gpuscout: verify: MISMATCH between the selection and what a child process sees",
        "  (S0, S1, ... number the selection in rank order, C0, C1, ... what the child "
        "lists in its rank order; a device keeps its number in every line)",
    ]
    selected = {id(d): i for i, d in enumerate(verdict.selected)}
    seen = {id(d): i for i, d in enumerate(verdict.seen)}
    for title, devices, prefix, numbers in (
        ("selected", verdict.selected, "S", selected),
        ("child sees", verdict.seen, "C", seen),
        ("selected but not seen", verdict.missing, "S", selected),
        ("seen but not selected", verdict.extra, "C", seen),
    ):
        listed = (
            "; ".join(prefix + describe(numbers.get(id(d), i), d) for i, d in enumerate(devices)) or "nothing"
        )
        lines.append(f"  {title}: {listed}")
    if verdict.extra:
        lines.append(
            "  (another vendor's devices stay visible unless --isolate is given; "
            "a library whose rule does not filter a multi-device selection shows all)"
        )
    return "\n".join(lines) + "\n"


def _name(d: DeviceInfo) -> str:
    """``CUDA GPU-8f25... (NVIDIA H200)``: the library, the id and the description if known."""
    what = d.description or d.name
    return f"{d.library} {d.uuid or d.id}" + (f" ({what})" if what else "")


def child_command(include_software: bool = False, scout_args: Sequence[str] = ()) -> list[str]:
    """The discovery child: this interpreter running ``gpuscout list --json``."""
    command = [sys.executable, "-m", "gpuscout", "list", "--json", *scout_args]
    if include_software:
        command.append("--include-software")
    return command


def _run(
    command: Sequence[str], env: Mapping[str, str], timeout: float, what: str, cpus: frozenset[int] | None
) -> subprocess.CompletedProcess[str]:
    """``command`` run with exactly ``env`` (on ``cpus``, None: unchanged), its output captured;
    VerifyError naming ``what`` when it cannot start or overruns ``timeout``."""
    from gpuscout._selection.affinity import pinned

    try:
        with pinned(cpus):
            return subprocess.run(
                list(command),
                env=dict(env),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
    except subprocess.TimeoutExpired:
        raise VerifyError(f"{what} did not finish within {timeout:g} s") from None
    except OSError as exc:
        raise VerifyError(f"cannot start the {what}: {exc}") from None


def child_view(
    env: Mapping[str, str], command: Sequence[str], timeout: float = DEFAULT_TIMEOUT
) -> list[DeviceInfo]:
    """Run the discovery ``command`` with exactly ``env`` and return the devices it lists."""
    from gpuscout._records.decode import structure

    done = _run(command, env, timeout, "verification child", None)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output on stderr"]
        raise VerifyError(f"verification child exited with status {done.returncode}: {tail[0]}")
    try:
        devices = json.loads(done.stdout)["devices"]
    except (ValueError, KeyError, TypeError) as exc:
        raise VerifyError(f"verification child printed no device list: {exc}") from None
    return structure(devices, list[DeviceInfo])


#: The child that says which CPUs it may run on (``os.sched_getaffinity``), one list per line.
_CPUS_CHILD = "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0)))))"


def child_cpus(
    env: Mapping[str, str], cpus: frozenset[int] | None, timeout: float = DEFAULT_TIMEOUT
) -> frozenset[int]:
    """Start a child the way ``exec`` does, on ``cpus`` (None: unchanged), and return the CPUs
    it says it may run on."""
    done = _run([sys.executable, "-c", _CPUS_CHILD], env, timeout, "CPU affinity child", cpus)
    try:
        if done.returncode != 0:
            raise ValueError(f"exit status {done.returncode}")
        return frozenset(int(n) for n in done.stdout.strip().split(","))
    except ValueError as exc:
        raise VerifyError(f"CPU affinity child gave no CPU list: {exc}") from None


def cpus_report(chosen: frozenset[int], seen: frozenset[int], unchanged: bool = False) -> tuple[bool, str]:
    """(whether a child runs on exactly ``chosen``, the line that says so); ``unchanged``: the
    affinity was left as it was, so ``chosen`` is this process's own set, not a choice."""
    from gpuscout._records.cpulist import cpulist

    which = "this process's own (affinity unchanged)" if unchanged else "the ones chosen"
    if seen == chosen:
        return True, f"gpuscout: verified: the child runs on CPUs {cpulist(chosen)}, {which}\n"
    expected = "this process's own were" if unchanged else "chosen were"
    return False, (
        f"gpuscout: verify: MISMATCH: the child runs on CPUs {cpulist(seen) or 'none'}, "
        f"{expected} {cpulist(chosen)}\n"
    )


def verify(
    selected: Sequence[DeviceInfo],
    env: Mapping[str, str],
    command: Sequence[str],
    timeout: float = DEFAULT_TIMEOUT,
) -> Verdict:
    """Run the discovery child with ``env`` and compare its devices with ``selected``."""
    return compare_views(selected, child_view(env, command, timeout))


__all__ = [
    "VERIFY_FAILED",
    "Verdict",
    "VerifyError",
    "child_command",
    "child_cpus",
    "child_view",
    "compare_views",
    "cpus_report",
    "report",
    "same_device",
    "verify",
]
