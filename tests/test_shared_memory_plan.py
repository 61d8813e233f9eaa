"""Shared-memory devices and the CPU draw from one pool: Scout.plan and Scout.fit count it once."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscout import DeviceInfo, GPULayersList, InsufficientMemoryError, Scout, SystemInfo
from gpuscout._layout.plan import create_layout, shared_pool
from gpuscout.sizes import GIB, MIB

MINIMUM = 457 * MIB  # the core's per-device reserve (no plugin answers for library "Acme")


def _scout() -> Scout:
    return Scout(plugins=[], entry_points=False)


def _unified(free: int, total: int = 128 * GIB, **kw: object) -> DeviceInfo:
    return DeviceInfo(
        id="GPU-u",
        library="Acme",
        name="unified",
        integrated=True,
        shared_memory=True,
        total_memory=total,
        free_memory=free,
        **kw,  # type: ignore[arg-type]
    )


def _discrete(free: int) -> DeviceInfo:
    return DeviceInfo(id="GPU-d", library="Acme", name="discrete", total_memory=free, free_memory=free)


def _placed(layout: GPULayersList, layers: list[int], ids: set[str]) -> int:
    return sum(layers[i] for g in layout if g.id in ids for i in g.layers)


def _cpu(layout: GPULayersList, layers: list[int]) -> int:
    on_gpu = {i for g in layout for i in g.layers}
    return sum(size for i, size in enumerate(layers) if i not in on_gpu)


def test_a_model_that_fits_the_gpu_but_not_the_system_is_refused() -> None:
    """60 GiB on a unified GPU whose 50 GiB free are the system's 50 GiB free: it does not fit twice."""
    layers = [6 * GIB] * 10
    system = SystemInfo(total_memory=128 * GIB, free_memory=50 * GIB)
    with pytest.raises(InsufficientMemoryError):
        _scout().plan(layers, [_unified(50 * GIB)], system)


def test_the_same_model_on_a_discrete_gpu_of_that_size_splits_with_the_cpu() -> None:
    """Counted as separate pools (a discrete card), 48 GiB on the GPU and 12 on the CPU fit."""
    layers = [6 * GIB] * 10
    system = SystemInfo(total_memory=128 * GIB, free_memory=50 * GIB)
    layout = _scout().plan(layers, [_discrete(50 * GIB)], system)
    assert (layout.sum(), _cpu(layout, layers)) == (8, 12 * GIB)


def test_what_fits_the_shared_pool_is_placed_on_the_unified_gpu() -> None:
    """30 GiB of layers on a unified GPU with 50 GiB free: all on the GPU, nothing refused."""
    layers = [3 * GIB] * 10
    layout = _scout().plan(layers, [_unified(50 * GIB)], SystemInfo(128 * GIB, 50 * GIB))
    assert layout.sum() == 10


def test_a_carve_out_beyond_system_free_counts_as_the_device_s_own() -> None:
    """A shared device reporting more free than the system (a carve-out in its figure) adds the excess."""
    devices = [_unified(100 * GIB)]
    system = SystemInfo(total_memory=32 * GIB, free_memory=20 * GIB)
    assert shared_pool(devices, system) == 100 * GIB
    assert shared_pool([_discrete(100 * GIB)], system) == 20 * GIB


layer_lists = st.lists(st.integers(0, 8 * GIB), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    layer_lists,
    st.integers(0, 64 * GIB),
    st.integers(0, 64 * GIB),
    st.integers(0, 8 * GIB),
    st.one_of(st.none(), st.integers(0, 64 * GIB)),
    st.booleans(),
)
def test_shared_devices_and_the_cpu_never_hold_more_than_the_system_has(
    layers: list[int], system_free: int, device_free: int, swap: int, discrete: int | None, spread: bool
) -> None:
    """Whatever plan returns puts at most system free (plus swap) on the shared device and the CPU."""
    shared = _unified(min(device_free, system_free))  # a unified part's free is the system's
    devices = [shared] + ([_discrete(discrete)] if discrete is not None else [])
    system = SystemInfo(total_memory=128 * GIB, free_memory=system_free, free_swap=swap)
    try:
        layout = _scout().plan(layers, devices, system, spread=spread)
    except InsufficientMemoryError:
        return
    assert _placed(layout, layers, {"GPU-u"}) + _cpu(layout, layers) <= system_free + swap
    assert _placed(layout, layers, {"GPU-u"}) <= max(0, shared.free_memory - MINIMUM)


@settings(max_examples=150, deadline=None)
@given(
    layer_lists, st.integers(0, 64 * GIB), st.integers(0, 8 * GIB), st.integers(0, 64 * GIB), st.booleans()
)
def test_without_shared_devices_only_the_cpu_share_is_checked(
    layers: list[int], system_free: int, swap: int, device_free: int, require_full: bool
) -> None:
    """No shared device: plan refuses exactly as before, when the CPU's share exceeds free RAM
    plus swap (with require_full also when layers are left over or the share exceeds free RAM)."""
    system = SystemInfo(total_memory=128 * GIB, free_memory=system_free, free_swap=swap)
    devices = [_discrete(device_free)]
    layout = create_layout(layers, devices, lambda d: MINIMUM, require_full=require_full)
    cpu = _cpu(layout, layers)
    refused = cpu > system_free + swap or (require_full and (layout.sum() < len(layers) or cpu > system_free))
    try:
        planned = _scout().plan(layers, devices, system, require_full=require_full)
    except InsufficientMemoryError:
        assert refused
    else:
        assert not refused and planned == layout


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    path = tmp_path_factory.mktemp("m") / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(4)
    w.add_context_length(4096)
    w.add_embedding_length(256)
    w.add_feed_forward_length(1024)
    w.add_head_count(8)
    w.add_head_count_kv(2)
    w.add_tensor("token_embd.weight", np.ones((16, 256), dtype=np.float32))
    for i in range(4):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(256, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", np.ones((256, 256), dtype=np.float16))
    w.add_tensor("output_norm.weight", np.ones(256, dtype=np.float32))
    w.add_tensor("output.weight", np.ones((16, 256), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_fit_counts_a_unified_gpu_and_the_cpu_once(tiny_model: Path) -> None:
    """fit: everything on a unified GPU plus the CPU's share above system free does not fit."""
    first = _scout().fit(tiny_model, devices=[_unified(8 * GIB)], system=SystemInfo(128 * GIB, 8 * GIB))
    assert first.fits
    assert any(n.startswith("Acme GPU-u (unified): memory shared with the system") for n in first.notes)
    need = sum(u.total for u in first.usage)
    tight = SystemInfo(total_memory=128 * GIB, free_memory=need - MIB)  # one MiB short of it all
    device = _unified(tight.free_memory)  # a unified GPU's free is the system's
    result = _scout().fit(tiny_model, devices=[device], system=tight)
    assert result.fits is False
    assert any("shared-memory devices" in n for n in result.notes)
    discrete = _discrete(need + MINIMUM)  # a card's own memory: the CPU keeps only its share
    assert _scout().fit(tiny_model, devices=[discrete], system=tight).fits is True
