"""CUDA's device order (CUDA_DEVICE_ORDER), which integer CUDA_VISIBLE_DEVICES entries index.

``PCI_BUS_ID`` numbers GPUs by ascending PCI address. The default ``FASTEST_FIRST`` is a driver
heuristic; on a box whose GPUs are all one model it gives PCI order. When the models differ the
order is learnt from the driver itself in a short child process (``cuInit`` there, never in the
host, so the host stays free to fork CUDA workers); without an answer, PCI order with a note.

The same child also answers each device's ``CU_DEVICE_ATTRIBUTE_INTEGRATED`` (18; the driver
API's ``cudaDeviceProp.integrated``), which NVML does not expose: ``unified.py`` asks it when NVML
has no memory figures for a GPU, so that "integrated" comes from the device, not from a guess.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

import attrs

from gpuscout.plugin import Context, RecordingError
from gpuscout.plugins.cuda.names import ORDER_ENV, VISIBLE_ENV
from gpuscout.plugins.cuda.readings import GpuReading

PCI_BUS_ID = "PCI_BUS_ID"
FASTEST_FIRST = "FASTEST_FIRST"
#: Longest the order probe may take when the context has no deadline (cuInit can take seconds).
PROBE_TIMEOUT = 10.0
#: Seconds kept back from the enumerate deadline for the rest of the enumeration.
PROBE_MARGIN = 0.25

#: The child: ctypes on the driver library; prints "domain bus device integrated" per CUDA
#: ordinal. Attributes: 50 PCI_DOMAIN_ID, 33 PCI_BUS_ID, 34 PCI_DEVICE_ID, 18 INTEGRATED.
PROBE_SCRIPT = """
import ctypes, sys
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError as exc:
    print("error: cannot load %s: %s" % (sys.argv[1], exc)); sys.exit(2)
rc = lib.cuInit(0)
if rc != 0:
    print("error: cuInit returned %d" % rc); sys.exit(3)
count = ctypes.c_int()
rc = lib.cuDeviceGetCount(ctypes.byref(count))
if rc != 0:
    print("error: cuDeviceGetCount returned %d" % rc); sys.exit(3)
for ordinal in range(count.value):
    dev = ctypes.c_int()
    if lib.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
        print("error: cuDeviceGet(%d) failed" % ordinal); sys.exit(3)
    values = []
    for attribute in (50, 33, 34, 18):
        value = ctypes.c_int()
        if lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, dev) != 0:
            print("error: cuDeviceGetAttribute(%d) failed" % attribute); sys.exit(3)
        values.append(value.value)
    print("%d %d %d %d" % tuple(values))
"""


def pci_order(gpus: Sequence[GpuReading]) -> list[GpuReading]:
    """``gpus`` by ascending PCI address (CUDA_DEVICE_ORDER=PCI_BUS_ID)."""
    return sorted(gpus, key=lambda g: g.pci)


def needs_probe(order: str | None, gpus: Sequence[GpuReading]) -> bool:
    """Whether CUDA's order must be asked of the driver: FASTEST_FIRST with several models."""
    if (order or FASTEST_FIRST).strip() == PCI_BUS_ID:
        return False
    return len({g.name for g in gpus}) > 1


#: One line of the probe: (domain, bus, device, integrated), integrated -1 when not printed.
ProbeRow = tuple[int, int, int, int]


def _is_row(line: str) -> bool:
    """Whether ``line`` is one probe row: three or four decimal numbers."""
    fields = line.split()
    return len(fields) in (3, 4) and all(f.isdigit() for f in fields)


def parse_probe_rows(output: str) -> list[ProbeRow] | None:
    """One row per CUDA ordinal from the child's output; None when it failed.

    Lines of three numbers (a probe without the integrated column) read as integrated -1.
    """
    found: list[ProbeRow] = []
    for line in output.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not _is_row(line):
            return None
        numbers = [int(f) for f in fields] + [-1]
        found.append((numbers[0], numbers[1], numbers[2], numbers[3]))
    return found


def parse_probe_output(output: str) -> list[tuple[int, int, int]] | None:
    """(domain, bus, device) per CUDA ordinal from the child's output; None when it failed."""
    rows = parse_probe_rows(output)
    return None if rows is None else [(d, b, dev) for d, b, dev, _ in rows]


def integrated_by_address(rows: Sequence[ProbeRow]) -> dict[tuple[int, int, int], bool]:
    """Whether the driver calls each PCI address integrated (rows without the answer left out)."""
    return {(d, b, dev): flag == 1 for d, b, dev, flag in rows if flag in (0, 1)}


def apply_probe_order(gpus: Sequence[GpuReading], probed: Sequence[tuple[int, int, int]]) -> list[GpuReading]:
    """``gpus`` in the probe's order; GPUs the probe did not list follow in PCI order.

    A GPU can appear several times in the probe (its MIG instances); its first place counts.
    """
    place: dict[tuple[int, int, int], int] = {}
    for ordinal, address in enumerate(probed):
        place.setdefault(address, ordinal)
    unplaced = len(probed)
    return sorted(
        pci_order(gpus),
        key=lambda g: place.get((g.pci.domain, g.pci.bus, g.pci.device), unplaced),
    )


def driver_library(platform: str) -> str:
    """The CUDA driver library's name on ``platform``."""
    return "nvcuda.dll" if platform == "win32" else "libcuda.so.1"


def probe_env(env: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: the host's, seeing every GPU in the default order."""
    child = {k: v for k, v in env.items() if k not in (VISIBLE_ENV, ORDER_ENV)}
    child[ORDER_ENV] = FASTEST_FIRST
    return child


def run_probe(context: Context, timeout: float) -> tuple[int, str]:
    """Run the probe child; (exit status, output). The seam tests replace."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", PROBE_SCRIPT, driver_library(context.platform)],
        env=probe_env(context.env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout + done.stderr


def probe_timeout(context: Context) -> float:
    """Seconds the probe may take: what the deadline leaves, less a margin, at most 10 s."""
    left = context.time_left()
    if left is None:
        return PROBE_TIMEOUT
    return min(PROBE_TIMEOUT, left - PROBE_MARGIN)


@attrs.frozen
class DriverProbe:
    """The probe child's answer: its rows, or None and why there are none."""

    rows: tuple[ProbeRow, ...] | None
    reason: str = ""


def _recorded_probe(answer: object) -> tuple[int, str]:
    """(status, output) of the probe as a recording holds it: ``{"status": 0, "output": "..."}``."""
    if not isinstance(answer, Mapping):
        raise RecordingError("answers/cuda.json: probe: expected an object {status, output}")
    status, output = answer.get("status"), answer.get("output")
    if isinstance(status, bool) or not isinstance(status, int) or not isinstance(output, str):
        raise RecordingError("answers/cuda.json: probe: status must be a whole number and output a str")
    return status, output


def probe_driver(context: Context) -> DriverProbe:
    """Ask the CUDA driver in the probe child, within what the context's deadline leaves."""
    timeout = probe_timeout(context)
    if timeout <= 0:
        return DriverProbe(None, "no time left to ask the CUDA driver")
    if context.replaying:
        answer = context.recorded("probe")
        if answer is None:
            return DriverProbe(None, "the recording holds no answer of the CUDA driver probe")
        status, output = _recorded_probe(answer)
    else:
        import subprocess  # only when the driver must be asked: it costs start-up time

        try:
            status, output = run_probe(context, timeout)
        except subprocess.TimeoutExpired:
            return DriverProbe(None, f"the CUDA driver probe took over {timeout:.1f} s")
        except OSError as exc:
            return DriverProbe(None, f"could not start the CUDA driver probe: {exc}")
        context.record("probe", {"status": status, "output": output[-65536:]})
    rows = parse_probe_rows(output) if status == 0 else None
    if rows is None and status == 0:
        bad = next(line for line in output.splitlines() if line.split() and not _is_row(line))
        return DriverProbe(
            None,
            f"the CUDA driver probe printed {bad.strip()[:200]!r}, not 'domain bus device [integrated]' "
            "in decimal numbers",
        )
    if rows is None:
        reason = output.strip().splitlines()[-1] if output.strip() else f"exit status {status}"
        return DriverProbe(None, f"the CUDA driver probe failed: {reason}")
    return DriverProbe(tuple(rows))


def _fallback(gpus: Sequence[GpuReading], context: Context, reason: str) -> list[GpuReading]:
    context.note(f"CUDA device order unknown (FASTEST_FIRST with mixed GPU models); PCI order used: {reason}")
    context.log.warning("cuda.order_fallback", reason=reason)
    return pci_order(gpus)


def cuda_order(
    gpus: Sequence[GpuReading], context: Context, probe: DriverProbe | None = None
) -> list[GpuReading]:
    """``gpus`` in the order CUDA numbers them under the context's CUDA_DEVICE_ORDER.

    ``probe`` is the driver's answer when the caller already asked it; else it is asked here,
    and only when the order needs it.
    """
    if not needs_probe(context.env.get(ORDER_ENV), gpus):
        return pci_order(gpus)
    probe = probe or probe_driver(context)
    if probe.rows is None:
        return _fallback(gpus, context, probe.reason)
    return apply_probe_order(gpus, [(d, b, dev) for d, b, dev, _ in probe.rows])
