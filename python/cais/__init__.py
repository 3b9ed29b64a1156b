"""cais: CAIS in-switch collectives for Python (numpy arrays and torch tensors).

The CAIS write-up's API (3.4, 4.2) over inca's C++ client
(include/inca/client/communicator.h); see docs/python.md::

    import cais
    cais.init(controller_addr="127.0.0.1:50051")          # rank/world size from RANK/WORLD_SIZE
    tp_group = cais.new_group(ranks=[0, 1, 2, 3], group_id=0)
    reduced = cais.all_reduce(partial_result, group=tp_group)   # in place, returns it
    cais.synchronize()

Importing cais also registers the torch.distributed backend "cais" when torch
is installed: ``dist.init_process_group("cais")``.

Buffers are used in place, without copies, when they are contiguous CPU
memory of a supported dtype (float32, float16, bfloat16, int32). A
non-contiguous tensor or array is reduced through a contiguous copy that is
written back, with a CaisWarning (the write-up's 3.4 note: the copy costs
time; call .contiguous() yourself to silence it).

This file only re-exports: the context (init, shutdown) is _context.py,
groups and Work _groups.py, the collectives _collectives.py, configure()
_configure.py, buffers _buffers.py, the declared settings _settings.py.
"""

from __future__ import annotations

import atexit
import os

try:
    from . import _cais
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "cais: the compiled module _cais is missing or does not load (%s). Build it with "
        "`ninja -C build/release cais_python` (or scripts/setup.sh) and put build/release/python "
        "on PYTHONPATH; it needs Debian's /usr/bin/python3." % e
    ) from e

__all__ = [
    "init", "new_group", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "synchronize",
    "configure", "layer",
    "set_offload", "stats", "switch_stats", "shutdown", "is_initialized", "get_rank",
    "get_world_size", "ReduceOp", "Group", "Work", "Error", "CaisWarning",
]

from ._buffers import CaisWarning  # noqa: E402,F401
from ._collectives import (ReduceOp, all_gather, all_reduce, broadcast, layer,  # noqa: E402,F401
                           reduce_scatter, set_offload, stats, synchronize)
from ._configure import DEFAULT_SWITCH_PAYLOAD, MAX_CHUNK_BYTES  # noqa: E402,F401
from ._configure import SWITCH_KEYS as _SWITCH_KEYS  # noqa: E402,F401
from ._configure import configure, switch_stats  # noqa: E402,F401
from ._context import DEFAULT_CONTROLLER_PORT, DEFAULT_SWITCH_PORT  # noqa: E402,F401
from ._context import WORLD_GROUP_ID, get_rank, get_world_size, init  # noqa: E402,F401
from ._context import is_initialized, shutdown  # noqa: E402,F401
from ._context import state as _state  # noqa: E402,F401  (tests read the client keys)
from ._groups import Group, Work, new_group  # noqa: E402,F401
from ._groups import c10d_groups as _c10d_groups, drain as _drain  # noqa: E402

Error = _cais.Error
"""Raised for failures that are neither bad arguments (ValueError), timeouts
(TimeoutError) nor an unreachable switch or controller (ConnectionError)."""


# The torch.distributed backend "cais", when torch and the backend are built.
if os.environ.get("CAIS_NO_TORCH") != "1":
    try:
        import torch  # noqa: F401  (import errors: no torch, numpy-only use)
    except ImportError:
        pass
    else:
        from . import torch_backend  # noqa: F401,E402


@atexit.register
def _release_pending() -> None:
    # Operations still in flight at exit keep writing their buffers until
    # they complete: wait for them before the interpreter frees the memory.
    for g in list(_state.groups.values()):
        _drain(g)
    # torch groups never destroyed: their delegated Gloo group's worker
    # threads must be gone before the interpreter finalizes.
    for pg in _c10d_groups():
        pg._release_delegate()
