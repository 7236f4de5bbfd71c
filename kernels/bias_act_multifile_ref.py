"""NumPy reference for bias_act_multifile.py."""

import numpy as np

CASES = [
    {"x": "float32[200,700]", "bias": "float32[200,1]"},
    {"x": "bfloat16[128,512]", "bias": "float32[128,1]", "act": '"tanh"'},
]

_ACTS = {
    "relu": lambda v: np.maximum(v, 0),
    "tanh": np.tanh,
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
}


def reference(x, bias, act="relu"):
    # The Scalar engine computes op(x * scale + bias) in fp32 and rounds once on write.
    v = x.astype(np.float32) * np.float32(0.5) + bias.astype(np.float32)
    return _ACTS[act](v).astype(x.dtype)
