"""GPUs on the PCI bus as Linux sysfs shows them, and the kernel driver each is bound to.

What a plugin that found no device uses to say why: a card no driver is bound to, or one bound
to a driver its library cannot use. Vendor neutral: the vendor id, its kernel modules and the
words for it are the caller's. Everything is read through the context (its root, deadline and
notes), so a recorded tree reads like the live ``/sys``; nothing here is read on a discovery
that found devices.

sysfs formats (Documentation/ABI/testing/sysfs-bus-pci): ``vendor`` holds ``0x1234\\n``,
``class`` the 24-bit class code ``0x030000\\n`` (base class in the top byte), ``driver`` is a
symbolic link to ``../../../bus/pci/drivers/<name>`` while a driver is bound, and ``uevent``
has a ``DRIVER=<name>`` line then (the fallback for a tree that recorded the link as a folder).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from gpuscout._machine.context import Context

PCI_DEVICES = "/sys/bus/pci/devices"
MODULES = "/sys/module"
#: PCI base classes of a GPU: display controller, processing accelerator.
GPU_BASE_CLASSES = frozenset({0x03, 0x12})
#: The most entries of ``PCI_DEVICES`` looked at (a large server has a few hundred functions).
MAX_PCI_ENTRIES = 4096
#: Drivers that hold a device for a virtual machine rather than for this system.
PASSTHROUGH_DRIVERS = frozenset({"vfio-pci", "pci-stub"})
#: A PCI address as the kernel names it (PCI_SLOT_NAME).
_ADDRESS = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_HEX = re.compile(r"0x[0-9a-fA-F]{1,8}")
#: A kernel driver or module name.
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@attrs.frozen
class PciGpu:
    """One PCI function of a GPU class: its address, vendor id, class code and bound driver."""

    address: str
    vendor: int
    pci_class: int
    #: The bound driver's name; '' when none is bound.
    driver: str = ""

    @property
    def class_text(self) -> str:
        """The class code as sysfs writes it: ``0x030000``."""
        return f"0x{self.pci_class:06x}"

    def describe(self, vendor_label: str) -> str:
        """``GPU 0000:01:00.0 (Acme, class 0x030200)``, with the caller's vendor label."""
        return f"GPU {self.address} ({vendor_label}, class {self.class_text})"


def parse_hex(text: str | None) -> int | None:
    """``0x1234\\n`` as an int; None for anything else."""
    value = (text or "").strip()
    return int(value, 16) if _HEX.fullmatch(value) else None


def is_gpu_class(pci_class: int) -> bool:
    """Whether a 24-bit PCI class code is a display controller or a processing accelerator."""
    return (pci_class >> 16) in GPU_BASE_CLASSES


def bound_driver(context: Context, address: str) -> str:
    """The name of the driver bound to PCI function ``address``, '' when none (or unreadable).

    The ``driver`` link's last component, when it has the kernel's ``.../drivers/<name>`` shape
    (the link is read, never followed: a loop costs nothing); else ``DRIVER=`` of ``uevent``.
    """
    base = f"{PCI_DEVICES}/{address}"
    target = context.read_link(f"{base}/driver")
    if target is not None:
        parts = target.rstrip("/").split("/")
        if len(parts) >= 2 and parts[-2] == "drivers" and _NAME.fullmatch(parts[-1]):
            return parts[-1]
        return ""
    for line in (context.read_text(f"{base}/uevent") or "").splitlines()[:64]:
        key, _, value = line.partition("=")
        if key == "DRIVER" and _NAME.fullmatch(value.strip()):
            return value.strip()
    return ""


def pci_gpus(context: Context, vendor: int) -> list[PciGpu] | None:
    """The GPU-class PCI functions of ``vendor`` (e.g. ``0x1234``) in address order; None when
    ``/sys/bus/pci/devices`` cannot be listed. At most ``MAX_PCI_ENTRIES`` entries are looked
    at (a note says when more were left); the scan stops when the deadline passes."""
    names = context.list_dir(PCI_DEVICES)
    if names is None:
        return None
    addresses = [n for n in names if _ADDRESS.fullmatch(n)]
    if len(addresses) > MAX_PCI_ENTRIES:
        context.note(
            f"{PCI_DEVICES}: {len(addresses)} PCI functions; only the first "
            f"{MAX_PCI_ENTRIES} looked at for GPUs"
        )
        addresses = addresses[:MAX_PCI_ENTRIES]
    found: list[PciGpu] = []
    for address in addresses:
        if context.time_left() == 0:
            break
        pci_class = parse_hex(context.read_text(f"{PCI_DEVICES}/{address}/class"))
        if pci_class is None or not is_gpu_class(pci_class):
            continue
        if parse_hex(context.read_text(f"{PCI_DEVICES}/{address}/vendor")) != vendor:
            continue
        found.append(PciGpu(address, vendor, pci_class, bound_driver(context, address)))
    return found


def module_loaded(context: Context, module: str) -> bool:
    """Whether kernel module ``module`` is loaded (or built in with parameters): whether
    ``/sys/module/<module>`` is a folder."""
    if not _NAME.fullmatch(module):
        return False
    return context.list_dir(f"{MODULES}/{module}") is not None


def binding_problem(
    context: Context,
    gpu: PciGpu,
    vendor_label: str,
    modules: Sequence[str],
    other_drivers: Mapping[str, str] | None = None,
) -> str:
    """Why ``gpu`` is not driven by any of ``modules`` (the drivers its library needs, e.g.
    ``("acmefb",)``), in one sentence; '' when it is bound to one of them.

    ``other_drivers`` maps a driver the library cannot use to the words that say so (e.g.
    ``{"oldfb": "which AcmeML cannot use"}``).
    """
    who = gpu.describe(vendor_label)
    wanted = " or ".join(modules)
    if not gpu.driver:
        loaded = [m for m in modules if module_loaded(context, m)]
        if not loaded:
            where = ", ".join(f"{MODULES}/{m}" for m in modules)
            return f"{who} has no driver bound and module {wanted} is not loaded ({where} missing)"
        return (
            f"{who} has no driver bound although module {loaded[0]} is loaded (the driver "
            "may have refused the card: see the kernel log, dmesg)"
        )
    if gpu.driver in modules:
        return ""
    if gpu.driver in PASSTHROUGH_DRIVERS:
        return f"{who} is bound to {gpu.driver} (passed through to a VM?), not to {wanted}"
    words = (other_drivers or {}).get(gpu.driver)
    return f"{who} is bound to {gpu.driver}, " + (words or f"not to {wanted}")


__all__ = [
    "GPU_BASE_CLASSES",
    "MAX_PCI_ENTRIES",
    "PASSTHROUGH_DRIVERS",
    "PCI_DEVICES",
    "PciGpu",
    "binding_problem",
    "bound_driver",
    "is_gpu_class",
    "module_loaded",
    "parse_hex",
    "pci_gpus",
]
