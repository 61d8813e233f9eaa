"""Rules of ggml-vulkan's default device set that the fifth mutmut round found untested.

Each test states the rule (ggml-org/ggml ``src/ggml-vulkan/ggml-vulkan.cpp`` at commit d99724f2,
``ggml_vk_instance_init``, as ``gpuscout.plugins.vulkan.default_set`` follows it) and names the
mutants of ``gpuscout.plugins.vulkan.default_set`` it kills (tests/MUTATION.md, "Fifth mutmut
round"). The loader answers are built by hand, as in test_vulkan_default_set.py.
"""

from __future__ import annotations

from typing import Any

from gpuscout.plugins.vulkan.default_set import ggml_default_set, reported_indices
from gpuscout.plugins.vulkan.loader import RawDevice
from tests.plugins.vulkan.test_vulkan_default_set import gpu as listed_gpu

AMD, MICROSOFT = 0x1002, 0x1414
AMDVLK, RADV, MOLTENVK, DOZEN = 2, 3, 14, 22
#: A VkDriverId no ggml table lists (a driver newer than ggml's tables).
UNLISTED = 99
DISCRETE, INTEGRATED = 2, 1


def gpu(index: int, **kw: Any) -> RawDevice:
    """test_vulkan_default_set's W7900 through RADV, with its own UUID and no PCI address
    (unless told otherwise)."""
    return listed_gpu(index, **{"uuid": "ab" * 16, "pci": None, **kw})


def test_a_driver_no_table_lists_ranks_last_and_dozen_beats_it_for_any_vendor() -> None:
    """ggml ranks a driver missing from its vendor's list after every listed one, and appends
    Dozen to every vendor's list, also for a vendor with no list of its own. So for one GPU seen
    twice: RADV replaces an unlisted driver of an AMD card, an unlisted driver never replaces
    RADV, and Dozen replaces an unlisted driver of a card whose vendor ggml has no list for.
    Kills driver_priority__mutmut_5 (no default table: TypeError for an unknown vendor) and
    _8/_10 (an unlisted driver ranked None: TypeError)."""
    assert ggml_default_set([gpu(0, driver_id=UNLISTED, driver_name="new"), gpu(1)]).used == [1]
    assert ggml_default_set([gpu(0), gpu(1, driver_id=UNLISTED, driver_name="new")]).used == [0]
    odd = [
        gpu(0, vendor_id=MICROSOFT, driver_id=UNLISTED, driver_name="new"),
        gpu(1, vendor_id=MICROSOFT, driver_id=DOZEN, driver_name="Dozen"),
    ]
    chosen = ggml_default_set(odd)
    assert chosen.used == [1]
    assert chosen.left_out[0].startswith("the same GPU (deviceUUID) as device 1")


def test_moltenvk_beside_another_driver_of_one_gpu_is_deduplicated() -> None:
    """The UUID dedupe is skipped only when *both* twins are MoltenVK (MoltenVK#2683); one
    MoltenVK view beside another driver's view of the same UUID is one GPU, and the listed
    driver (RADV) is kept. Kills _same_gpu__mutmut_2 (``or``: either one MoltenVK skips it)."""
    raws = [gpu(0, driver_id=MOLTENVK, driver_name="MoltenVK"), gpu(1)]
    chosen = ggml_default_set(raws)
    assert chosen.used == [1]
    assert set(chosen.left_out) == {0}


def test_gpus_without_a_device_uuid_are_never_taken_for_one_gpu() -> None:
    """A device without VkPhysicalDeviceIDProperties (Vulkan 1.0: uuid "") says nothing about
    its identity, so two such GPUs are two GPUs, both used. Kills _same_gpu__mutmut_8 (the
    empty UUID compared to "XXXX", so two empty UUIDs match)."""
    raws = [gpu(0, uuid=""), gpu(1, uuid="", name="AMD Radeon RX 7900 XTX")]
    assert ggml_default_set(raws).used == [0, 1]


def test_a_device_type_outside_vulkans_list_is_named_by_its_number() -> None:
    """A VkPhysicalDeviceType value the plugin does not name (a newer driver's) is not a
    discrete or integrated GPU, so it is left out, and the reason gives the number it reported.
    Kills ggml_default_set__mutmut_5/7/8 (the default name None, or "None")."""
    chosen = ggml_default_set([gpu(0, device_type=7), gpu(1, uuid="cd" * 16)])
    assert chosen.used == [1]
    assert chosen.left_out == {0: "a 7 device, not a discrete or integrated GPU"}


def test_a_replaced_twin_names_both_drivers_by_name_or_by_id() -> None:
    """The reason a twin is left out names the driver ggml prefers and the one it drops, each by
    its driverName, or by its VkDriverId when the driver gave no name. Kills
    _twin_reason__mutmut_2 (``and``: the dropped driver named by its id though it has a name)."""
    named = ggml_default_set([gpu(0, driver_id=AMDVLK, driver_name="AMD open-source driver"), gpu(1)])
    assert named.left_out[0] == (
        "the same GPU (deviceUUID) as device 1, whose driver radv ggml prefers to AMD open-source driver"
    )
    nameless = ggml_default_set([gpu(0, driver_id=AMDVLK, driver_name=""), gpu(1, driver_name="")])
    assert nameless.left_out[0].endswith("whose driver 3 ggml prefers to 2")


def test_the_notes_name_every_device_left_out_and_every_idle_integrated_gpu() -> None:
    """With GGML_VK_VISIBLE_DEVICES unset the plugin says, in one note, which devices ggml's
    default set leaves out and why (one entry per device, "; " between them), and in another
    which integrated GPUs llama.cpp's loader leaves idle beside a discrete one ("add integrated
    GPUs only if no other devices were found"; ", " between them); each device's
    ``unused_reason`` says the same. The whole text is pinned: it is what a user reads. Kills
    reported_indices__mutmut_18/29/33/34/35/36/37 and ggml_default_set__mutmut_13 (the
    separators and sentences changed)."""
    raws = [
        gpu(0, name="AMD Radeon Graphics", device_type=INTEGRATED, uuid="01" * 16),
        gpu(1, name="Intel(R) Graphics", device_type=INTEGRATED, uuid="02" * 16),
        gpu(2, name="old", storage_16bit=False, uuid="03" * 16),
        gpu(3, name="slow", storage_16bit=None, uuid="04" * 16),
        gpu(4),
    ]
    order, notes, unused = reported_indices(raws, None)
    assert order == [0, 1, 4, 2, 3]
    assert notes == [
        "Vulkan: not in ggml-vulkan's default device set (GGML_VK_VISIBLE_DEVICES unset), so a "
        "child does not use them unless selected: id 3 'old' (raw index 2): no "
        "storageBuffer16BitAccess; id 4 'slow' (raw index 3): no storageBuffer16BitAccess",
        "Vulkan: integrated GPU id 0 'AMD Radeon Graphics', id 1 'Intel(R) Graphics' is in "
        "ggml-vulkan's default set, but llama.cpp's model loader uses integrated GPUs only when "
        "no other GPU is found, and a discrete one is",
    ]
    reason = "not in ggml-vulkan's default device set: no storageBuffer16BitAccess"
    assert unused == {2: reason, 3: reason}
