"""NumPy reference for tensor_add.py and tensor_add_legacy.py."""

import numpy as np

CASES = [
    {"a": "bfloat16[256,1024]", "b": "bfloat16[256,1024]"},
    {"a": "float32[128,512]", "b": "float32[128,512]"},
]


def reference(a, b):
    # The Vector engine adds in fp32 and rounds once to the output dtype.
    return (a.astype(np.float32) + b.astype(np.float32)).astype(a.dtype)
