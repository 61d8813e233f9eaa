"""Why the Vulkan loader lists no device, for Intel GPUs (which only Vulkan serves here):
asked only when the loader lists none.

One sentence per Intel GPU on the PCI bus, naming the kernel driver it is bound to or the
module that is not loaded; nothing when the bus holds no Intel GPU (the loader's own error says
the rest). Read through the context, so a recorded tree explains itself as a live machine does.
"""

from __future__ import annotations

from gpuscout.plugin import Context, binding_problem, pci_gpus

INTEL_VENDOR = 0x8086
VENDOR_LABEL = "Intel"
#: The kernel modules Mesa's Intel Vulkan driver (ANV) runs on.
MODULES = ("i915", "xe")
#: The most GPUs described one by one.
MAX_DESCRIBED = 8


def intel_problems(context: Context) -> list[str]:
    """One sentence per Intel GPU on the PCI bus (Linux only): why no kernel driver serves it,
    or, when i915 or xe does, that the Vulkan driver is what is missing."""
    if not context.platform.startswith("linux"):
        return []
    found: list[str] = []
    for gpu in (pci_gpus(context, INTEL_VENDOR) or [])[:MAX_DESCRIBED]:
        problem = binding_problem(context, gpu, VENDOR_LABEL, MODULES)
        found.append(
            problem
            or (
                f"{gpu.describe(VENDOR_LABEL)} is bound to {gpu.driver}, so the kernel driver is "
                "loaded (is Mesa's Intel Vulkan driver installed?)"
            )
        )
    return found


def explain_no_device(context: Context) -> None:
    """Notes ``intel_problems`` beside the loader's error."""
    for sentence in intel_problems(context):
        context.note(sentence)
