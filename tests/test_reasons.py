"""Which reason for an empty discovery matters most (gpuscout._discovery.reasons)."""

from __future__ import annotations

from gpuscout._discovery.reasons import ABSENT, HIDDEN, PRESENT, SOFTWARE, drop_weight, lead, note_weight


def test_a_note_naming_a_variable_set_here_weighs_most() -> None:
    """`hidden by CUDA_VISIBLE_DEVICES` with that variable set: HIDDEN."""
    assert note_weight("8 device(s) hidden by CUDA_VISIBLE_DEVICES", {"CUDA_VISIBLE_DEVICES": ""}) == HIDDEN


def test_a_note_naming_an_unset_variable_is_only_absence() -> None:
    """`(GGML_VK_VISIBLE_DEVICES unset)` names a variable this environment does not set."""
    assert note_weight("not in the default set (GGML_VK_VISIBLE_DEVICES unset)", {}) == ABSENT


def test_a_note_naming_a_pci_address_is_hardware_present() -> None:
    """`GPU 0000:01:00.0 ... has no driver bound`: a device on the bus that nothing serves."""
    assert note_weight("GPU 0000:01:00.0 (class 0x030000) has no driver bound", {}) == PRESENT


def test_another_platform_or_a_missing_library_is_absence() -> None:
    """`only on macOS`, a ModuleNotFoundError, a bus that lists none: ABSENT."""
    for note in (
        "Metal: only on macOS (platform 'linux')",
        "amdsmi unavailable (ModuleNotFoundError: No module named 'amdsmi')",
        "no AMD GPU on the PCI bus (/sys/bus/pci/devices lists none)",
    ):
        assert note_weight(note, {"PATH": "/bin"}) == ABSENT, note


def test_a_dropped_device_weighs_by_why() -> None:
    """Software: SOFTWARE; hidden by a variable set here: HIDDEN; anything else: PRESENT."""
    env = {"CUDA_VISIBLE_DEVICES": ""}
    assert drop_weight("software device", True, env) == SOFTWARE
    assert drop_weight("hidden by CUDA_VISIBLE_DEVICES=''", False, env) == HIDDEN
    assert drop_weight("compute capability 3.5 is below 5.0", False, env) == PRESENT


def test_the_lead_is_the_first_of_the_lowest_weight_and_none_for_only_absence() -> None:
    """lead([3, 2, 1, 1]) is 2; a list of ABSENT only has no lead."""
    assert lead([ABSENT, SOFTWARE, PRESENT, PRESENT]) == 2
    assert lead([ABSENT, ABSENT]) is None and lead([]) is None
