"""NumPy reference for scaled_relu_legacy.py."""

import numpy as np

CASES = [
    {"x": "float32[300,96]"},
    {"x": "bfloat16[130,512]", "scale": "0.25", "shift": "1.0"},
]


def reference(x, scale=2.0, shift=-0.5):
    # Each step runs on an engine in fp32 and is rounded to x's dtype on write.
    t = (x.astype(np.float32) * np.float32(scale)).astype(x.dtype)
    t = (t.astype(np.float32) + np.float32(shift)).astype(x.dtype)
    return np.maximum(t.astype(np.float32), 0).astype(x.dtype)
