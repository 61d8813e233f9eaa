"""Rules found by mutmut's survivors (tests/MUTATION.md, "Automatic mutants (mutmut)").

Each test states a rule of a module that no other test stated; the mutant it kills is named in
its docstring's last line.
"""

from __future__ import annotations

import threading

from gpuscout.hidden import set_aside
from gpuscout.records import DeviceInfo
from gpuscout.results import DUPLICATE_REASON, SOFTWARE_REASON, Dropped

# -- hidden.set_aside -----------------------------------------------------------------------------

HIDDEN = DeviceInfo(id="GPU-0", library="CUDA", pci_id="0000:2a:00.0", hidden_by="CUDA_VISIBLE_DEVICES=1")
VISIBLE = DeviceInfo(id="GPU-1", library="CUDA", pci_id="0000:3b:00.0")
VK_A = DeviceInfo(id="0", library="Vulkan", pci_id="0000:2a:00.0")
VK_B = DeviceInfo(id="1", library="Vulkan", pci_id="0000:2a:00.0")


def test_set_aside_ends_on_a_cycle_of_replaced_records() -> None:
    """The walk along replaced records stops at a record it has seen: two drops naming each other
    (a plugin reporting one id twice) end the walk instead of looping for ever, and both stay
    plain duplicates of records that are gone.
    Kills gpuscout.hidden.x__survivor_of__mutmut_7 (``seen.add(None)``)."""
    dropped = [
        Dropped(VK_A, DUPLICATE_REASON, VK_B.device_id),
        Dropped(VK_B, DUPLICATE_REASON, VK_A.device_id),
    ]
    result: list[object] = []
    worker = threading.Thread(
        target=lambda: result.append(set_aside([HIDDEN, VISIBLE], dropped)), daemon=True
    )
    worker.start()
    worker.join(timeout=10)
    assert result, "set_aside did not return within 10 s on a cycle of duplicates"
    kept, out = result[0]  # type: ignore[misc]
    assert kept == [VISIBLE]
    assert [(d.device.id, d.reason) for d in out] == [
        ("GPU-0", "hidden by CUDA_VISIBLE_DEVICES=1"),
        ("0", DUPLICATE_REASON),
        ("1", DUPLICATE_REASON),
    ]


def test_set_aside_passes_a_drop_that_is_not_a_duplicate_through() -> None:
    """Only a duplicate (reason ``duplicate``) follows the hidden device it names: a record dropped
    for another reason leaves set_aside as it came, even when it names the hidden device and
    even when it names none.
    Kills gpuscout.hidden.x_set_aside__mutmut_22 (``owner = ""``) and _23 (``and`` -> ``or``)."""
    other = Dropped(VK_A, SOFTWARE_REASON, HIDDEN.device_id)
    plain = Dropped(VK_B, SOFTWARE_REASON)
    kept, out = set_aside([HIDDEN, VISIBLE], [other, plain])
    assert kept == [VISIBLE]
    assert out[1:] == [other, plain]
