"""What libhsakmt (the kernel interface under ROCr) makes of the KFD topology.

The HSA runtime in a child sees a GPU only when libhsakmt does. Its rules (ROCR-Runtime
``libhsakmt/src``), in the order it applies them:

- ``openclose.c`` ``hsaKmtOpenKFD``: ``/dev/kfd`` is opened ``O_RDWR | O_CLOEXEC``; when that
  fails nothing else happens and the runtime has no GPU.
- ``topology.c`` ``topology_sysfs_check_node_supported`` with ``fmm.c``
  ``hsakmt_open_drm_render_device``: a GPU node's ``/dev/dri/renderD<drm_render_minor>`` is
  opened ``O_RDWR | O_CLOEXEC``. ENOENT or EPERM leave the node out (it gets no HSA node id and
  no GPU index); any other error (EACCES, EISDIR, ...), a missing ``drm_render_minor`` or one
  outside 128..255 fails topology init: no GPU at all.
- ``topology.c`` ``topology_sysfs_get_node_props``: for each GPU node, HSA node id ``n``, it reads
  ``HSA_OVERRIDE_GFX_VERSION_<n>``, else ``HSA_OVERRIDE_GFX_VERSION`` (set but empty counts as set);
  a value ``parse_override`` rejects fails topology init. ``n`` is libhsakmt's user node id: the
  position among the nodes that survived the check above, CPU nodes included, so it equals the
  KFD sysfs node number until a node before it is left out. It is not the GPU index.

Device files are looked up under the context's root like every other file, and only opened,
never read. Under a recorded tree (root other than ``/``) they are plain empty files, and anything
else there (a device, a FIFO, a socket) is refused unopened, since opening some devices acts.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence

import attrs

from gpuscout.plugin import Context
from gpuscout.plugins.rocm import gfx
from gpuscout.plugins.rocm.names import OVERRIDE
from gpuscout.plugins.rocm.sysfs import KfdNode

KFD_DEVICE = "/dev/kfd"
#: libhsakmt's render minors (fmm.c DRM_FIRST_RENDER_NODE, DRM_LAST_RENDER_NODE).
FIRST_RENDER_MINOR, LAST_RENDER_MINOR = 128, 255
#: Render-node open errors that leave one node out instead of failing topology init.
_NODE_SKIPPED = (errno.ENOENT, errno.EPERM)
_OPEN_FLAGS = os.O_RDWR | os.O_CLOEXEC


def render_device(minor: int) -> str:
    """The render node libhsakmt opens for ``drm_render_minor`` ``minor``."""
    return f"/dev/dri/renderD{minor}"


def open_error(context: Context, path: str) -> int:
    """0 when ``path`` (under the root) opens read-write, as libhsakmt opens it; else the errno.

    The file is closed at once and never read. Under a recorded tree anything but a regular file
    or a directory (which fails with EISDIR) is refused with a note and counts as missing (ENOENT),
    and a file whose text is ``denied`` stands for a node not permitted (EACCES; ``denied
    EPERM``: EPERM).
    """
    if context.root not in ("", "/"):
        # Looked at through the context, which resolves the tree's links inside its root.
        if context.is_dir(path):
            return errno.EISDIR
        if not context.exists(path):
            return errno.ENOENT
        if not context.is_file(path):
            context.note(f"{path}: not a plain file in the recorded tree; not opened")
            return errno.ENOENT
        if context.device_node(path) == "denied":
            # A recorded node this process was not permitted to open: EPERM from a device
            # cgroup ("denied EPERM"), else EACCES from the permission bits.
            text = (context.read_text(path) or "").split()
            return errno.EPERM if text[1:2] == ["EPERM"] else errno.EACCES
        return 0
    where = context.path(path)
    try:
        fd = os.open(where, _OPEN_FLAGS)
    except OSError as exc:
        return exc.errno or errno.EIO
    except ValueError:
        return errno.ENOENT
    os.close(fd)
    return 0


def kfd_failure(context: Context) -> str:
    """Why the runtime cannot open ``/dev/kfd`` (then it has no GPU), '' when it can."""
    code = open_error(context, KFD_DEVICE)
    if not code:
        return ""
    return (
        f"{context.shown(KFD_DEVICE)} cannot be opened read-write ({errno.errorcode.get(code, code)}"
        f": {os.strerror(code)}), so the HSA runtime finds no GPU"
    )


@attrs.frozen
class Survivors:
    """The KFD GPU nodes libhsakmt keeps, each with its HSA node id, or why it keeps none."""

    nodes: list[KfdNode] = attrs.Factory(list)
    hsa_ids: list[int] = attrs.Factory(list)
    #: One line per node left out (its render node is missing or not permitted).
    skipped: list[str] = attrs.Factory(list)
    #: Why topology init fails as a whole ('' when it does not).
    failure: str = ""


def supported_nodes(context: Context, nodes: Sequence[KfdNode]) -> Survivors:
    """The GPU ``nodes`` (KFD order) whose render node opens, as libhsakmt filters them."""
    kept: list[KfdNode] = []
    ids: list[int] = []
    skipped: list[str] = []
    for node in nodes:
        minor = node.prop("drm_render_minor")
        if not FIRST_RENDER_MINOR <= minor <= LAST_RENDER_MINOR:
            return Survivors(
                failure=(
                    f"KFD node {node.node} has drm_render_minor {minor} (libhsakmt needs "
                    f"{FIRST_RENDER_MINOR}..{LAST_RENDER_MINOR}): topology init fails, "
                    "so the HSA runtime finds no GPU"
                )
            )
        path = render_device(minor)
        code = open_error(context, path)
        name = errno.errorcode.get(code, str(code))
        if code in _NODE_SKIPPED:
            skipped.append(
                f"KFD node {node.node} left out: {context.shown(path)} cannot be opened read-write ({name})"
            )
            continue
        if code:
            return Survivors(
                failure=(
                    f"{context.shown(path)} of KFD node {node.node} cannot be opened read-write "
                    f"({name}: {os.strerror(code)}): topology init fails, so the HSA runtime "
                    "finds no GPU"
                )
            )
        kept.append(node)
        # Nodes are numbered 0..N-1; each one left out before this node shifts its id down.
        ids.append(node.node - len(skipped))
    return Survivors(kept, ids, skipped)


def override_value(env: Mapping[str, str], hsa_id: int | None) -> tuple[str, str] | None:
    """(variable, value) of the override libhsakmt reads for HSA node ``hsa_id``: the per-node
    variable, else the global one; None when neither is set (set but empty counts as set)."""
    names = ([f"{OVERRIDE}_{hsa_id}"] if hsa_id is not None else []) + [OVERRIDE]
    for name in names:
        value = env.get(name)
        if value is not None:
            return name, value
    return None


def overrides(
    env: Mapping[str, str],
    hsa_ids: Sequence[int | None],
) -> tuple[list[gfx.Version | None], str]:
    """The gfx override of each GPU (by HSA node id), and '' or why topology init fails.

    An override of 0.0.0 is accepted by libhsakmt but changes nothing: ROCr uses the override
    only when it is non-zero (``amd_gpu_agent.cpp`` ``GpuAgent::GpuAgent``).
    """
    found: list[gfx.Version | None] = []
    for hsa_id in hsa_ids:
        named = override_value(env, hsa_id)
        if named is None:
            found.append(None)
            continue
        version = gfx.parse_override(named[1])
        if version is None:
            return [], (
                f"{named[0]}={named[1]!r} is not major.minor.stepping (major <= "
                f"{gfx.OVERRIDE_MAJOR_MAX}, minor and stepping <= "
                f"{gfx.OVERRIDE_MINOR_MAX}): libhsakmt fails topology init, so the HSA "
                "runtime finds no GPU"
            )
        found.append(None if version == (0, 0, 0) else version)
    return found, ""
