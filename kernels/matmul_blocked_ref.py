"""NumPy reference for matmul_blocked.py."""

import numpy as np

CASES = [
    {"lhsT": "bfloat16[512,256]", "rhs": "bfloat16[512,1024]"},
    {"lhsT": "bfloat16[256,512]", "rhs": "bfloat16[256,1024]", "block_m": "512", "bufs": "3"},
    {"lhsT": "float32[384,128]", "rhs": "float32[384,512]", "block_m": "128", "block_n": "512"},
]


def reference(lhsT, rhs, **_blocking):
    # bf16 products are exact in fp32; PSUM accumulates in fp32; the copy out rounds to
    # the output dtype. The blocking changes the order of nothing a result depends on.
    acc = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    return acc.astype(lhsT.dtype)
