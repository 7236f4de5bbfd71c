"""NumPy reference for matmul_tiled.py."""

import numpy as np

CASES = [
    {"lhsT": "bfloat16[512,128]", "rhs": "bfloat16[512,1024]"},
    {"lhsT": "bfloat16[256,256]", "rhs": "bfloat16[256,512]"},
]


def reference(lhsT, rhs):
    # bf16 products are exact in fp32; PSUM accumulates in fp32; the copy out rounds to bf16.
    acc = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    return acc.astype(lhsT.dtype)
