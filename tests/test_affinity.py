"""CPU affinity for a child (``gpuscout._selection.affinity``, ``Scout.cpu_affinity``): the union of the
selected devices' local CPUs, within what the process may use, or nothing changed with a note."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from gpuscout import DeviceInfo, GpuscoutError
from gpuscout._selection.affinity import Affinity, allowed_cpus, for_devices, pinned, supported

NODE0 = DeviceInfo(id="GPU-a", library="CUDA", pci_id="0000:19:00.0", numa_node=0, local_cpus="0-3,8-11")
NODE1 = DeviceInfo(id="GPU-b", library="CUDA", pci_id="0000:9a:00.0", numa_node=1, local_cpus="4-7,12-15")
NOWHERE = DeviceInfo(id="GPU-c", library="CUDA", pci_id="0000:c1:00.0")
EVERY = frozenset(range(16))

linux_only = pytest.mark.skipif(not supported(), reason="this platform has no sched_setaffinity")


def test_one_device_s_child_runs_on_its_node_s_cpus() -> None:
    """A device's local CPU list is the child's CPU set, and the note names its node."""
    decided = for_devices([NODE0], EVERY)
    assert decided.cpus == frozenset({0, 1, 2, 3, 8, 9, 10, 11})
    assert decided.cpulist == "0-3,8-11"
    assert decided.note.startswith("CPU affinity 0-3,8-11 (NUMA node 0, local to 0=CUDA")


def test_devices_on_two_nodes_give_the_union_of_their_cpus() -> None:
    """With devices on several nodes the child may run on every one of their CPUs."""
    decided = for_devices([NODE0, NODE1], EVERY)
    assert decided.cpus == EVERY
    assert "NUMA nodes 0, 1" in decided.note


def test_cpus_the_process_may_not_use_are_left_out_and_said() -> None:
    """Only CPUs this process may use are chosen (a cpuset narrower than the node)."""
    decided = for_devices([NODE0], frozenset({2, 3, 4, 5}))
    assert decided.cpus == frozenset({2, 3})
    assert "0-1,8-11 left out: not allowed to this process" in decided.note


def test_local_cpus_all_outside_the_allowed_set_change_nothing() -> None:
    """When none of the local CPUs is allowed, the child keeps the process's CPUs."""
    decided = for_devices([NODE1], frozenset({0, 1}))
    assert decided.cpus is None
    assert decided.note == (
        "CPU affinity unchanged: the CPUs local to the selection (4-7,12-15) are outside those "
        "this process may use (0-1)"
    )


def test_no_known_locality_changes_nothing_and_says_so() -> None:
    """A device whose kernel gives no local CPU list leaves the affinity alone, with a note."""
    decided = for_devices([NOWHERE], EVERY)
    assert decided == Affinity(
        None,
        "CPU affinity unchanged: the kernel gives no CPU locality for 0=CUDA (GPU-c, 0000:c1:00.0)",
    )


def test_a_device_without_locality_next_to_one_with_it_is_named() -> None:
    """Mixed: the known device's CPUs are used and the other device is named in the note."""
    decided = for_devices([NODE0, NOWHERE], EVERY)
    assert decided.cpus == frozenset({0, 1, 2, 3, 8, 9, 10, 11})
    assert decided.note.endswith("; no CPU locality known for 1=CUDA (GPU-c, 0000:c1:00.0)")


def test_nothing_selected_or_no_platform_support_changes_nothing() -> None:
    """No device, or a platform without sched_setaffinity: unchanged, each with its reason."""
    assert for_devices([], EVERY) == Affinity(None, "CPU affinity unchanged: no device is selected")
    assert for_devices([NODE0], EVERY, platform_supported=False).note == (
        "CPU affinity unchanged: this platform cannot set a process's CPUs"
    )


@pytest.mark.parametrize("hostile", ["0-3$(reboot)", "3-1", "0-3,2", "99999999999", "0-3:2", "-1", "a"])
def test_a_local_cpu_list_the_kernel_would_not_write_never_reaches_a_child(hostile: str) -> None:
    """A garbled or hostile CPU list is refused with the record, so it can pick no CPUs."""
    with pytest.raises(GpuscoutError, match="local_cpus"):
        for_devices([DeviceInfo(id="GPU-x", library="CUDA", local_cpus=hostile)], EVERY)


def test_the_scout_refuses_what_is_not_a_device_list(gpuscout_scout: object) -> None:
    """Scout.cpu_affinity checks its argument like the other device methods."""
    scout = gpuscout_scout()  # type: ignore[operator]
    with pytest.raises(GpuscoutError, match="cpu_affinity"):
        scout.cpu_affinity("cuda:0")
    assert scout.cpu_affinity([]).cpus is None


def _child_cpus() -> frozenset[int]:
    code = "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0)))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return frozenset(int(n) for n in out.strip().split(","))


@linux_only
def test_a_child_started_while_pinned_inherits_the_cpus_and_the_thread_gets_its_own_back() -> None:
    """pinned(): the child runs on the chosen CPUs; afterwards the thread's set is restored."""
    before = allowed_cpus()
    assert before
    one = frozenset({min(before)})
    with pinned(one):
        assert _child_cpus() == one
    assert allowed_cpus() == before
    with pinned(None):
        assert _child_cpus() == before


@linux_only
def test_pinning_one_thread_leaves_the_host_s_other_threads_alone() -> None:
    """Only the calling thread is pinned (Linux's sched_setaffinity(0) is per thread)."""
    before = allowed_cpus()
    assert before
    seen: list[frozenset[int]] = []
    inside, done = threading.Event(), threading.Event()

    def other() -> None:
        inside.wait(10)
        seen.append(frozenset(os.sched_getaffinity(0)))
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with pinned(frozenset({min(before)})):
        inside.set()
        assert done.wait(10)
    thread.join(10)
    assert seen == [before]


@linux_only
def test_cpus_that_cannot_be_set_raise_and_change_nothing() -> None:
    """A set of CPUs that do not exist is the kernel's error, and the thread keeps its CPUs."""
    before = allowed_cpus()
    with pytest.raises(OSError), pinned(frozenset({(1 << 20) - 1})):
        pass
    assert allowed_cpus() == before
