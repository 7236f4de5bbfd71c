"""A long device loop (bench_scale.py): `nl.fori_loop` over 100,000 trips of a three-instruction
body on a 128x512 fp32 tile (a DMA in, an add into an accumulator, a scale): 400,000 executed
instructions from a program of a dozen."""

import nki
import nki.isa as nisa
import nki.language as nl

TRIPS = 100_000


@nki.jit
def device_loop(data):
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros(data.shape, dtype=data.dtype, buffer=nl.sbuf)

    def body(i):
        t = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=0.5)

    nl.fori_loop(0, TRIPS, body)
    nisa.dma_copy(dst=out, src=acc)
    return out
