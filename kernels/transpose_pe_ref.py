"""NumPy reference for transpose_pe.py."""

CASES = [
    {"x": "float32[256,384]"},
    {"x": "bfloat16[128,128]"},
]


def reference(x):
    return x.T.copy()  # a transpose moves bits: exact in every dtype
