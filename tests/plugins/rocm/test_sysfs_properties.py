"""Properties of the ROCm plugin's sysfs parsers and record rules over arbitrary input: no
exception, no number outside 0..2**64-1, and what the kernel writes read back exactly."""

from __future__ import annotations

import re
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout._machine.context import Context
from gpuscout.plugins.rocm import devices, sysfs
from gpuscout.testing import in_u64, write_tree

U64 = 1 << 64
#: Digits of other scripts, which str.isdigit() and int() accept and the kernel never writes.
FOREIGN_DIGITS = "\u00b2\u00b3\u00b9\u0660\u0661\u0662\u0663\u0669\u0966\u0967"
u64 = st.integers(min_value=0, max_value=U64 - 1)
SLOT = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")

# Numbers as a hostile file might spell them: huge, negative, other scripts' digits, signs.
numberish = st.one_of(
    st.integers(min_value=-(U64 * 2), max_value=U64 * 2).map(str),
    st.text(alphabet="0123456789-+.xX" + FOREIGN_DIGITS, min_size=1, max_size=30),
    st.just("9" * 5000),
)
key = st.text(
    alphabet=st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp")), min_size=1, max_size=20
).filter(lambda k: k.split() == [k])
properties_text = st.one_of(
    st.lists(st.builds(lambda k, v: f"{k} {v}", key, numberish), max_size=10).map("\n".join),
    st.text(max_size=300),
)
counter_text = st.one_of(numberish, u64.map(lambda v: f"{v}\n"), st.text(max_size=30))


# -- pure parsers -----------------------------------------------------------------------------------


@settings(max_examples=500)
@given(properties_text)
def test_parse_properties_never_raises_and_stays_in_u64(text: str) -> None:
    """Any properties text gives only values in 0..2**64-1."""
    assert all(0 <= v < U64 for v in sysfs.parse_properties(text).values())


@settings(max_examples=300)
@given(st.dictionaries(key, u64, max_size=30))
def test_parse_properties_reads_back_what_kfd_writes(props: dict[str, int]) -> None:
    """``key value`` lines in decimal read back as the same dict."""
    text = "".join(f"{k} {v}\n" for k, v in props.items())
    assert sysfs.parse_properties(text) == props


@settings(max_examples=500)
@given(st.text(max_size=300))
def test_parse_uevent_never_raises(text: str) -> None:
    """Any uevent text, ``=`` or not, gives a dict of strings."""
    parsed = sysfs.parse_uevent(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in parsed.items())


@settings(max_examples=200)
@given(
    st.dictionaries(
        st.from_regex(r"[A-Z_]{1,16}", fullmatch=True),
        st.text(alphabet=st.characters(blacklist_categories=("Cc", "Zl", "Zp", "Cs")), max_size=30),
        max_size=10,
    )
)
def test_parse_uevent_reads_back_key_value_lines(values: dict[str, str]) -> None:
    """``KEY=value`` lines read back as the same dict, ``=`` inside values included."""
    text = "".join(f"{k}={v}\n" for k, v in values.items())
    assert sysfs.parse_uevent(text) == values


@settings(max_examples=300)
@given(u64, u64)
def test_pci_slot_of_any_domain_and_location_is_a_slot(domain: int, location: int) -> None:
    """pci_slot always answers ``dddd:bb:dd.f`` and parse_slot takes it back unchanged."""
    slot = sysfs.pci_slot(domain, location)
    assert SLOT.fullmatch(slot) and sysfs.parse_slot(slot) == slot


@settings(max_examples=300)
@given(st.text(max_size=40))
def test_parse_slot_answers_a_slot_or_nothing(text: str) -> None:
    """parse_slot gives a lower-case PCI slot or ''."""
    slot = sysfs.parse_slot(text)
    assert slot == "" or SLOT.fullmatch(slot)


# -- readers over recorded trees ---------------------------------------------------------------------

NODE = f"{sysfs.TOPOLOGY}/1"
DEVICE = f"{sysfs.DRM}/renderD128/device"


@settings(max_examples=100, deadline=None)
@given(properties_text, properties_text)
def test_kfd_nodes_over_any_properties_stay_in_u64(node: str, bank: str) -> None:
    """read_kfd_gpu_nodes over any node and bank properties gives u64 props and bank sizes."""
    files = {
        f"{NODE}/properties": node,
        f"{NODE}/mem_banks/0/properties": bank,
        f"{NODE}/mem_banks/1/properties": bank,
    }
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        nodes = sysfs.read_kfd_gpu_nodes(Context(env={}, platform="linux", root=root)) or []
    for found in nodes:
        assert 0 <= found.bank_size < U64 and all(0 <= v < U64 for v in found.props.values())


@settings(max_examples=100, deadline=None)
@given(counter_text, counter_text, counter_text, counter_text, st.text(max_size=60))
def test_drm_device_over_any_counters_stays_in_u64(
    vram: str,
    vram_used: str,
    gtt: str,
    gtt_used: str,
    uevent: str,
) -> None:
    """read_drm_device over any counter files gives counters in 0..2**64-1 and a valid slot."""
    files = {
        f"{DEVICE}/mem_info_vram_total": vram,
        f"{DEVICE}/mem_info_vram_used": vram_used,
        f"{DEVICE}/mem_info_gtt_total": gtt,
        f"{DEVICE}/mem_info_gtt_used": gtt_used,
        f"{DEVICE}/uevent": uevent,
    }
    node = sysfs.KfdNode(1, {"drm_render_minor": 128, "location_id": 0x0C00})
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        drm = sysfs.read_drm_device(Context(env={}, platform="linux", root=root), node)
    assert all(in_u64(v) for v in (drm.vram_total, drm.vram_used, drm.gtt_total, drm.gtt_used))
    assert SLOT.fullmatch(drm.slot)


@settings(max_examples=100, deadline=None)
@given(u64, u64, u64, u64)
def test_drm_device_reads_back_well_formed_counters(
    vram: int,
    vram_used: int,
    gtt: int,
    gtt_used: int,
) -> None:
    """Counters written as amdgpu does (decimal and a newline) read back exactly."""
    files = {
        f"{DEVICE}/mem_info_vram_total": f"{vram}\n",
        f"{DEVICE}/mem_info_vram_used": f"{vram_used}\n",
        f"{DEVICE}/mem_info_gtt_total": f"{gtt}\n",
        f"{DEVICE}/mem_info_gtt_used": f"{gtt_used}\n",
    }
    node = sysfs.KfdNode(1, {"drm_render_minor": 128})
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        drm = sysfs.read_drm_device(Context(env={}, platform="linux", root=root), node)
    assert (drm.vram_total, drm.vram_used, drm.gtt_total, drm.gtt_used) == (vram, vram_used, gtt, gtt_used)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(max_size=40), st.builds("{}.{}.{}".format, numberish, numberish, numberish)))
def test_driver_version_of_any_file_stays_in_u64(text: str) -> None:
    """read_driver_version over any version file gives two numbers in 0..2**64-1."""
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, {sysfs.DRIVER_VERSION: text})
        major, minor = sysfs.read_driver_version(Context(env={}, platform="linux", root=root))
    assert 0 <= major < U64 and 0 <= minor < U64


@settings(max_examples=100, deadline=None)
@given(u64, u64, u64)
def test_driver_version_reads_back_a_dkms_version(major: int, minor: int, patch: int) -> None:
    """``major.minor.patch`` reads back as (major, minor)."""
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, {sysfs.DRIVER_VERSION: f"{major}.{minor}.{patch}\n"})
        found = sysfs.read_driver_version(Context(env={}, platform="linux", root=root))
    assert found == (major, minor)


# -- record rules ------------------------------------------------------------------------------------

maybe_u64 = st.none() | u64
facts = st.builds(
    devices.GpuFacts,
    ordinal=st.integers(min_value=0, max_value=64),
    gfx_version=u64,
    device_id=u64,
    unique_id=u64,
    slot=st.just("0000:0c:00.0"),
    vram_total=maybe_u64,
    vram_used=maybe_u64,
    gtt_total=maybe_u64,
    gtt_used=maybe_u64,
    board_files=st.booleans(),
    partitions=st.integers(min_value=1, max_value=16),
    partition_memory=u64,
    driver=st.tuples(u64, u64),
)


@settings(max_examples=500)
@given(facts, u64)
def test_build_never_raises_and_memory_stays_in_u64(gpu: devices.GpuFacts, system_free: int) -> None:
    """Any facts with 64-bit figures build a record with 0 <= free <= total < 2**64."""
    device = devices.build(gpu, 0, system_free=system_free)
    assert 0 <= device.free_memory <= device.total_memory < U64
