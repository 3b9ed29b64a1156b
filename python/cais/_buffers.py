"""Host buffers for cais: numpy arrays and torch tensors as (pointer, count,
dtype) that inca reads and writes in place, with contiguous copies (and the
write-back) for non-contiguous ones. Internal to the cais package."""

from __future__ import annotations

import sys
import warnings
from typing import Any, Dict, List

from . import _cais


class CaisWarning(UserWarning):
    """A performance note: e.g. a non-contiguous buffer was copied."""


class Buffer:
    """A host buffer inca can read/write in place: ptr, count, dtype code; the
    objects to keep alive, and the write-back for a non-contiguous original."""

    __slots__ = ("ptr", "count", "dtype", "keep", "orig", "dense", "kind")

    def __init__(self) -> None:
        self.keep: List[Any] = []
        self.orig = None
        self.dense = None

    def write_back(self) -> None:
        if self.orig is None:
            return
        if self.kind == "torch":
            import torch
            with torch.no_grad():
                self.orig.copy_(self.dense)
        else:
            self.orig[...] = self.dense


_NUMPY_DTYPES = {"float32": _cais.DTYPE_F32, "float16": _cais.DTYPE_F16, "int32": _cais.DTYPE_I32}


def _torch_dtypes() -> Dict[Any, int]:
    import torch
    return {torch.float32: _cais.DTYPE_F32, torch.float16: _cais.DTYPE_F16,
            torch.bfloat16: _cais.DTYPE_BF16, torch.int32: _cais.DTYPE_I32}


def _is_torch(x: Any) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def buffer_of(x: Any, what: str, writable: bool) -> Buffer:
    b = Buffer()
    if _is_torch(x):
        import torch
        b.kind = "torch"
        if x.device.type != "cpu":
            raise ValueError("cais.%s: the tensor is on %s; cais reads host memory: move it with "
                             ".cpu() (and back with .to(device))" % (what, x.device))
        if x.layout != torch.strided:
            raise ValueError("cais.%s: %s tensors are not supported; convert with .to_dense()"
                             % (what, x.layout))
        code = _torch_dtypes().get(x.dtype)
        if code is None:
            raise ValueError("cais.%s: dtype %s is not supported by the switch; use float32, "
                             "float16, bfloat16 or int32 (e.g. x.float())" % (what, x.dtype))
        t = x.detach()
        if not t.is_contiguous():
            warnings.warn("cais.%s: non-contiguous tensor reduced through a contiguous copy "
                          "(write-up 3.4: the copy costs time; pass .contiguous())" % what,
                          CaisWarning, stacklevel=3)
            b.orig, b.dense = t, t.contiguous()
            t = b.dense
        b.ptr, b.count, b.dtype = t.data_ptr(), t.numel(), code
        b.keep = [x, t]
        return b
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        b.kind = "numpy"
        code = _NUMPY_DTYPES.get(x.dtype.name)
        if code is None:
            raise ValueError("cais.%s: dtype %s is not supported by the switch; use float32, "
                             "float16 or int32 (e.g. x.astype(numpy.float32))" % (what, x.dtype))
        if writable and not x.flags.writeable:
            raise ValueError("cais.%s: the array is read-only and the result is written in "
                             "place; pass a writable copy (x.copy())" % what)
        a = x
        if not x.flags.c_contiguous:
            warnings.warn("cais.%s: non-contiguous array reduced through a contiguous copy "
                          "(write-up 3.4: the copy costs time; pass numpy.ascontiguousarray(x))"
                          % what, CaisWarning, stacklevel=3)
            a = np.ascontiguousarray(x)
            if writable:
                b.orig, b.dense = x, a
        b.ptr, b.count, b.dtype = a.ctypes.data, a.size, code
        b.keep = [x, a]
        return b
    raise TypeError("cais.%s takes a numpy.ndarray or a torch.Tensor, got %s"
                    % (what, type(x).__name__))


def empty_like_shape(x: Any, shape: tuple) -> Any:
    if _is_torch(x):
        import torch
        return torch.empty(shape, dtype=x.dtype)
    import numpy as np
    return np.empty(shape, dtype=x.dtype)


def empty_like_stacked(x: Any, n: int) -> Any:
    return empty_like_shape(x, (n,) + tuple(x.shape))


