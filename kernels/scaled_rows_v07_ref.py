"""NumPy reference for scaled_rows_v07.py."""

import numpy as np

CASES = [
    {
        "data": "float32[16,64]",
        "n": "int32[1,1]~randint(0,17)",
        "repeats": "int32[1,1]~randint(0,5)",
    },
    {"data": "float32[8,32]", "n": "int32[1,1]~randint(0,9)", "repeats": "int32[1,1]~zeros"},
]


def reference(data, n, repeats):
    k = int(n.reshape(-1)[0])
    out = np.zeros_like(data)
    out[:k] = -2.0 * data[:k]  # double, identity, negate
    total = np.zeros((1, data.shape[1]), dtype=np.float32)
    for _ in range(int(repeats.reshape(-1)[0])):
        total = total + data[0:1]
    return out, total
