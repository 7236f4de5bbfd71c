# ruff: noqa: E501 - program text: long lines are the programs' own
"""NumPy on trace-time values (host arrays a kernel builds to compute indices, masks and
constants), and an `@nki.jit` kernel made by a builder function."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["np_repeat"] = """
import numpy as np

def main():
    a = np.arange(3)
    print(np.repeat(a, 2).tolist(), np.repeat([[1, 2], [3, 4]], 2, axis=0).tolist(),
          np.repeat(a, [1, 0, 2]).tolist(), a.repeat(2).tolist())
"""

PROGRAMS["np_tile"] = """
import numpy as np

def main():
    a = np.array([1, 2])
    print(np.tile(a, 3).tolist(), np.tile(a, (2, 2)).tolist(), np.tile([[1], [2]], 2).tolist())
"""

PROGRAMS["np_arange_reshape_sum"] = """
import numpy as np

def main():
    a = np.arange(12).reshape(3, 4)
    print(a.shape, a.sum(), a.sum(axis=0).tolist(), a[1].tolist(), a[:, 2].tolist(), a.T.shape)
"""

PROGRAMS["np_prod_and_shapes"] = """
import numpy as np

def main():
    shape = (4, 128, 512)
    print(int(np.prod(shape)), int(np.prod(shape[1:])), np.prod([]), len(shape))
"""

PROGRAMS["np_dtype_sizes"] = """
import numpy as np

def main():
    print(np.dtype(np.float32).itemsize, np.dtype("float16").itemsize, np.float32(1.5) * 2,
          np.int32(7) // 2)
"""

PROGRAMS["np_zeros_ones_full"] = """
import numpy as np

def main():
    print(np.zeros(3).tolist(), np.ones((2, 2), dtype=np.int32).tolist(), np.full(2, 7).tolist())
"""

PROGRAMS["np_cumsum_and_diff"] = """
import numpy as np

def main():
    a = np.array([1, 2, 3, 4])
    print(np.cumsum(a).tolist(), np.diff(a).tolist(), a.cumprod().tolist())
"""

PROGRAMS["np_where_and_boolean_mask"] = """
import numpy as np

def main():
    a = np.arange(6)
    print(np.where(a % 2 == 0, a, -1).tolist(), a[a > 2].tolist(), (a > 2).sum())
"""

PROGRAMS["np_concatenate_and_stack"] = """
import numpy as np

def main():
    a, b = np.array([1, 2]), np.array([3, 4])
    print(np.concatenate([a, b]).tolist(), np.stack([a, b]).tolist(), np.vstack([a, b]).shape)
"""

PROGRAMS["np_minmax_argmax"] = """
import numpy as np

def main():
    a = np.array([3, 9, 1, 9])
    print(a.max(), a.min(), a.argmax(), a.argmin(), np.maximum(a, 4).tolist(), np.clip(a, 2, 5).tolist())
"""

PROGRAMS["np_linspace_and_round"] = """
import numpy as np

def main():
    print(np.linspace(0, 1, 5).tolist(), np.round(np.array([1.25, 2.5, 3.75]), 1).tolist())
"""

PROGRAMS["np_integer_ceil_division"] = """
import numpy as np

def main():
    sizes = np.array([1, 128, 129, 300])
    print(((sizes + 127) // 128).tolist(), np.ceil(sizes / 128).astype(int).tolist())
"""

PROGRAMS["np_array_equality_and_any_all"] = """
import numpy as np

def main():
    a = np.array([1, 2, 3])
    print((a == [1, 0, 3]).tolist(), np.array_equal(a, [1, 2, 3]), np.all(a > 0), np.any(a > 2))
"""

PROGRAMS["np_outer_and_broadcast"] = """
import numpy as np

def main():
    a = np.arange(3)
    print((a[:, None] * a[None, :]).tolist(), np.outer(a, [1, 10]).tolist())
"""

PROGRAMS["np_sort_unique"] = """
import numpy as np

def main():
    a = np.array([3, 1, 3, 2])
    print(np.sort(a).tolist(), np.unique(a).tolist(), np.argsort(a, kind="stable").tolist())
"""

PROGRAMS["jit_kernel_defined_inside_a_builder"] = """
import nki
import nki.language as nl

def build(scale):
    @nki.jit
    def scaled(x):
        return x
    print("built with", scale)
    return scaled

def main():
    k = build(3)
    print(callable(k), k.__name__)
"""

PROGRAMS["np_int_types_as_python_values"] = """
import numpy as np

def main():
    a = np.arange(4)
    print([int(x) for x in a], int(a[2]) + 1, float(np.float32(0.5)), type(int(a[0])).__name__)
"""

PROGRAMS["np_meshgrid_and_indices"] = """
import numpy as np

def main():
    i, j = np.meshgrid(np.arange(2), np.arange(3), indexing="ij")
    print(i.tolist(), j.tolist(), np.indices((2, 2)).shape)
"""
