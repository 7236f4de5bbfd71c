"""NumPy reference for attention_legacy.py."""

import numpy as np

CASES = [
    {"q": "bfloat16[128,256]", "k": "bfloat16[128,256]", "v": "bfloat16[128,256]"},
    {"q": "bfloat16[128,512]", "k": "bfloat16[128,512]", "v": "bfloat16[128,512]"},
]


def reference(q, k, v):
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s = q.T @ k
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.T
