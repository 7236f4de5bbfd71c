"""NKI 0.7 style: whole-Python meta-programming and loops the device runs.

The stages applied to each row are user classes (one inherits from the other) produced by a
generator and looked up under try/except; rows are addressed by a lambda building a dynamic
access pattern. `nl.fori_loop` copies the first `n` rows (n read from HBM at run time,
through an NkiScalar) scaled by the stages; `nl.while_loop` adds row 0 into an accumulator
`repeats` times, counting an NkiScalar down to zero.
"""

import nki
import nki.isa as nisa
import nki.language as nl


class Stage:
    factor = 1.0

    def apply(self, tile):
        nisa.tensor_scalar(dst=tile, data=tile, op0=nl.multiply, operand0=self.factor)


class Double(Stage):
    factor = 2.0


class Negate(Stage):
    factor = -1.0


def pipeline(names):
    known = {"double": Double, "negate": Negate}
    for name in names:
        try:
            yield known[name]()
        except KeyError:
            yield Stage()  # an unknown name leaves the row as it is


@nki.jit
def scaled_rows(data, n, repeats):
    rows, cols = data.shape
    out = nl.ndarray((rows, cols), dtype=data.dtype, buffer=nl.shared_hbm)
    total = nl.ndarray((1, cols), dtype=data.dtype, buffer=nl.shared_hbm)

    zeros = nl.zeros((rows, cols), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zeros)

    row = lambda t, i: t.ap([[cols, 1], [1, cols]], scalar_offset=i, indirect_dim=0)  # noqa: E731

    stages = list(pipeline(["double", "identity", "negate"]))

    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)
    count = nisa.scalar_load(n_sb)

    def body(i):
        tile = nl.ndarray((1, cols), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=row(data, i))
        for stage in stages:
            stage.apply(tile)
        nisa.dma_copy(dst=row(out, i), src=tile)

    nl.fori_loop(0, count, body)

    first = nl.ndarray((1, cols), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=first, src=data[0:1, :])
    acc = nl.zeros((1, cols), dtype=data.dtype, buffer=nl.sbuf)
    r_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=r_sb, src=repeats)

    def again(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=first, op=nl.add)
        return r - 1

    nl.while_loop(nisa.scalar_load(r_sb), again)
    nisa.dma_copy(dst=total, src=acc)
    return out, total
