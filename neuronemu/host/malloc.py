"""glibc's malloc, set for a process that makes and drops many arrays of 0.1-30 MiB: the
`neuronemu` command as a process of its own (`neuronemu.cli.entry`), never a host's process.

Past its mmap threshold (128 KiB at start), glibc gives each allocation pages of its own and
hands them back on free, so each NumPy temporary of a tile (a 128 x 1024 tile converted to
fp32 is 512 KiB) faults its pages in afresh: the conversions of `kernels/tensor_add.py` at
4096 x 4096 took 0.026 s instead of 0.005 s. glibc raises the threshold by itself once a
large block is freed, so how fast a run executed depended on whether some earlier pass had
happened to free one. Here it is set: blocks up to MMAP_THRESHOLD come from the heap, which
keeps up to TRIM_THRESHOLD of freed memory for the next ones (the two values glibc's own
raise reaches: its ceiling for the threshold, and the trim threshold twice that).
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_arrays"]

MMAP_THRESHOLD = 32 * 2**20  # bytes (glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
TRIM_THRESHOLD = 64 * 2**20

# mallopt's parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_arrays() -> bool:
    """Set the thresholds (glibc on Linux only); whether they were set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # (another C library)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
