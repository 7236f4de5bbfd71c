"""Integer conversions through the whole machine (issue 37, item 4), each path's documented rule.

Every expectation is computed here with NumPy/ml_dtypes from the rule as the AWS docs state it,
never from neuronemu's own casts:
- DMA (nisa.dma_copy, nl.load/nl.store) and tensor_copy (Vector, GpSimd, Scalar on NC-v3+):
  equal dtypes move the bits; different dtypes go src -> fp32 -> dst, integers of one width
  included (nki.isa.dma_copy, nki-dma-overview.rst, nki.isa.tensor_copy).
- activation(op=nl.copy) and tensor_scalar arithmetic: the Scalar/Vector engines compute in
  fp32 and cast the result, even between equal dtypes (nki.isa.activation, tensor_scalar).
- fp32 -> integer: round half to even, saturate, +-inf to the limits (NKI 0.6.0 release
  notes: "fp32-to-integer casts match hardware"); NaN -> 0 is inferred (no document says).
- fp32 -> float: round to nearest even; overflow to inf (NaN for float8_e4m3fn): ml_dtypes.
- rng: each 32-bit value truncated to dst's type, its least significant bits kept (nki.isa.rng).
- inferred (see neuronemu_isa.numerics): bitvec results are written as bit patterns (the
  value modulo 2**bits of dst); iota's and GpSimd's exact int32 results go to an integer dst
  saturated, without an fp32 rounding.
"""

from __future__ import annotations

import hashlib

import ml_dtypes
import numpy as np
import pytest

import neuronemu

P = 4
INTS = ["int8", "int16", "int32", "uint8", "uint16", "uint32"]
FLOATS = ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2"]
DTYPES = INTS + FLOATS
NP = {
    **{name: np.dtype(name) for name in INTS},
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

# 0, -1, the extremes of every integer type, 2**24 + 1 (the first integer fp32 cannot hold),
# ties for rounding, and the non-finite floats.
EDGES = [0, -1, 1, 2**24 + 1, 2**24 + 3, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 255.5]
EDGES += [v for t in INTS for v in (int(np.iinfo(t).min), int(np.iinfo(t).max))]
EDGES += [float("nan"), float("inf"), float("-inf"), 65504.0, 1e10, -1e10]


def edge_values(src: str) -> np.ndarray:
    """[P, N] of the edge values `src` can hold (integers: exactly; floats: rounded to it)."""
    dt = NP[src]
    if src in INTS:
        info = np.iinfo(dt)
        ints = sorted({int(v) for v in EDGES if float(v).is_integer()})
        row = np.array([v for v in ints if info.min <= v <= info.max], dtype=dt)
    else:
        with np.errstate(over="ignore"):
            row = np.array(EDGES, dtype=np.float64).astype(np.float32).astype(dt)
    return np.tile(row, (P, 1))


# ---------------------------------------------------------------------------------------------
# The documented rules, independently.


def fp32_to(x: np.ndarray, dst: str) -> np.ndarray:
    """fp32 values written to `dst`: RNE; integers saturate, +-inf to the limits, NaN -> 0."""
    x = np.asarray(x, dtype=np.float32)
    dt = NP[dst]
    if dst in INTS:
        info = np.iinfo(dt)
        wide = x.astype(np.float64)
        wide = np.where(np.isnan(wide), 0.0, wide)  # NaN -> 0: inferred
        return np.clip(np.rint(wide), info.min, info.max).astype(dt)
    with np.errstate(over="ignore"):
        return x.astype(dt)


def via_fp32(src: np.ndarray, dst: str) -> np.ndarray:
    """src -> fp32 (RNE: an integer over 2**24 rounds) -> dst."""
    return fp32_to(src.astype(np.float32), dst)


def copy_rule(src: np.ndarray, dst: str) -> np.ndarray:
    """A copy: the bits between equal dtypes, else through fp32."""
    return src.copy() if src.dtype == NP[dst] else via_fp32(src, dst)


def modular(values: np.ndarray, dst: str) -> np.ndarray:
    """Integer values modulo 2**bits of `dst`, as its two's-complement pattern."""
    dt = NP[dst]
    return (values.astype(np.int64) % (1 << (8 * dt.itemsize))).astype(np.uint64).astype(dt)


def saturated(values: np.ndarray, dst: str) -> np.ndarray:
    info = np.iinfo(NP[dst])
    return np.clip(values.astype(np.int64), info.min, info.max).astype(NP[dst])


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal dtypes and equal bits, any NaN matching any NaN."""
    assert got.dtype == want.dtype, what
    if want.dtype.kind == "f" or want.dtype in (NP[f] for f in FLOATS):
        nan = np.isnan(want.astype(np.float32))
        assert np.array_equal(np.isnan(got.astype(np.float32)), nan), what
        got, want = got[~nan], want[~nan]
    width = np.dtype(f"u{want.dtype.itemsize}")
    bad = np.flatnonzero(got.view(width) != want.view(width))
    if bad.size:
        i = bad[0]
        raise AssertionError(f"{what}: element {i} is {got.flat[i]!r}, documented {want.flat[i]!r}")


# ---------------------------------------------------------------------------------------------
# The machine.


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """run(source, inputs, target=None) -> outputs by name; each distinct run happens once."""
    folder = tmp_path_factory.mktemp("int_conv")
    done: dict[str, dict[str, np.ndarray]] = {}

    def run(source: str, inputs: dict[str, np.ndarray], target: str | None = None):
        key = hashlib.sha1((source + str(target)).encode()).hexdigest()[:16]
        if key not in done:
            path = folder / f"k_{key}.py"
            path.write_text(source)
            done[key] = dict(neuronemu.run(str(path), inputs, target=target).outputs)
        return done[key]

    return run


def kernel(params: str, outputs: list[tuple[str, tuple[int, ...], str]], body: str) -> str:
    lines = [f"{n} = nl.ndarray({s}, dtype=nl.{d}, buffer=nl.shared_hbm)" for n, s, d in outputs]
    lines += body.strip("\n").splitlines()
    code = "\n".join("    " + line for line in lines)
    names = ", ".join(n for n, _, _ in outputs)
    return HEADER + f"@nki.jit\ndef k({params}):\n{code}\n    return {names}\n"


# ---------------------------------------------------------------------------------------------
# The kernel of issue 37: a uint32 "not found" index stored into an int32 output.

STORE_LEGACY = """
t = nl.load(idx)
nl.store(out, value=t)
"""
STORE_DMA = """
t = nl.ndarray(idx.shape, dtype=nl.uint32, buffer=nl.sbuf)
nisa.dma_copy(dst=t, src=idx)
nisa.dma_copy(dst=out, src=t)
"""
STORE_BITS = """
t = nl.ndarray(idx.shape, dtype=nl.uint32, buffer=nl.sbuf)
nisa.dma_copy(dst=t, src=idx)
nisa.dma_copy(dst=out, src=t.view(nl.int32))
"""
INDICES = np.tile(np.array([0, 1, 7, 0xFFFFFFFF, 2**31, 2**24 + 1], np.uint32), (P, 1))


@pytest.mark.parametrize("body", [STORE_LEGACY, STORE_DMA], ids=["nl.store", "nisa.dma_copy"])
def test_storing_uint32_into_int32_converts_through_fp32_and_saturates(machine, body):
    out = machine(kernel("idx", [("out", INDICES.shape, "int32")], body), {"idx": INDICES})["out"]
    # The DMA casts uint32 -> fp32 -> int32: 0xFFFFFFFF is 2**32 in fp32, above int32's range,
    # so 2147483647, not -1; 2**24 + 1 rounds to 2**24 in fp32.
    want = np.clip(np.rint(INDICES.astype(np.float32).astype(np.float64)), -(2**31), 2**31 - 1)
    assert_same(out, want.astype(np.int32), "uint32 -> int32 store")
    assert out[0, 3] == 2147483647 and out[0, 5] == 16777216


def test_storing_a_view_of_the_bits_keeps_minus_one(machine):
    out = machine(kernel("idx", [("out", INDICES.shape, "int32")], STORE_BITS), {"idx": INDICES})
    assert_same(out["out"], INDICES.view(np.int32), "uint32 viewed as int32, stored")
    assert out["out"][0, 3] == -1


# ---------------------------------------------------------------------------------------------
# Every dtype pair through each conversion path.

COPY_PATHS = {
    "dma": "nisa.dma_copy(dst={out}, src=x)",  # SBUF src dtype -> HBM dst dtype (a store)
    "tensor_copy-vector": "nisa.tensor_copy(dst={y}, src=x, engine=nisa.engine.vector)",
    "tensor_copy-gpsimd": "nisa.tensor_copy(dst={y}, src=x, engine=nisa.engine.gpsimd)",
    "tensor_copy-scalar": "nisa.tensor_copy(dst={y}, src=x, engine=nisa.engine.scalar)",
    "activation-copy": "nisa.activation(dst={y}, op=nl.copy, data=x)",
    "tensor_scalar-add0": "nisa.tensor_scalar(dst={y}, data=x, op0=nl.add, operand0=0.0)",
}


def expected(path: str, src: np.ndarray, dst: str) -> np.ndarray:
    if path in ("dma",) or path.startswith("tensor_copy"):
        return copy_rule(src, dst)
    if path == "activation-copy":  # always through fp32, equal dtypes too
        return via_fp32(src, dst)
    return fp32_to(src.astype(np.float32) + np.float32(0.0), dst)


def path_outputs(machine, path: str, src: str) -> dict[str, np.ndarray]:
    a = edge_values(src)
    shape = a.shape
    body = f"x = nl.ndarray({shape}, dtype=nl.{src}, buffer=nl.sbuf)\nnisa.dma_copy(dst=x, src=a)\n"
    for dst in DTYPES:
        out, y = f"out_{dst}", f"y_{dst}"
        if path == "dma":
            body += COPY_PATHS[path].format(out=out) + "\n"
        else:
            body += f"{y} = nl.ndarray({shape}, dtype=nl.{dst}, buffer=nl.sbuf)\n"
            body += COPY_PATHS[path].format(y=y) + "\n"
            body += f"nisa.dma_copy(dst={out}, src={y})\n"  # equal dtypes: the bits
    outputs = [(f"out_{d}", shape, d) for d in DTYPES]
    return machine(kernel("a", outputs, body), {"a": a})


@pytest.mark.parametrize("dst", DTYPES)
@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("path", list(COPY_PATHS))
def test_each_dtype_pair_converts_by_its_paths_documented_rule(machine, path, src, dst):
    got = path_outputs(machine, path, src)[f"out_{dst}"]
    with np.errstate(over="ignore", invalid="ignore"):
        want = expected(path, edge_values(src), dst)
    assert_same(got, want, f"{path} {src} -> {dst}")


def test_nan_and_infinities_to_integers(machine):
    """Hard-coded, not derived: NaN -> 0 (inferred), +-inf -> the destination's limits."""
    got = path_outputs(machine, "dma", "float32")
    edges = edge_values("float32")[0]
    nan, pinf, ninf = (
        int(np.flatnonzero(f(edges))[0])
        for f in (np.isnan, lambda e: e == np.inf, lambda e: e == -np.inf)
    )
    for dst in INTS:
        info = np.iinfo(NP[dst])
        row = got[f"out_{dst}"][0]
        assert (row[nan], row[pinf], row[ninf]) == (0, info.max, info.min), dst


# ---------------------------------------------------------------------------------------------
# rng: the low bits of each 32-bit value.

RNG_P = 128  # the engine's whole lane state is drawn from


def test_rng_truncates_each_value_to_its_low_bits(machine):
    outputs = [("ref", (RNG_P, 16), "uint32")] + [(f"out_{d}", (RNG_P, 16), d) for d in INTS]
    body = (
        "s = nl.ndarray((1, 1), dtype=nl.uint32, buffer=nl.sbuf)\nnisa.dma_copy(dst=s, src=seed)\n"
    )
    for name, shape, dtype in outputs:  # reseeded each time: the same bits every draw
        body += f"t_{name} = nl.ndarray({shape}, dtype=nl.{dtype}, buffer=nl.sbuf)\n"
        body += f"nisa.set_rng_seed(s)\nnisa.rng(dst=t_{name})\n"
        body += f"nisa.dma_copy(dst={name}, src=t_{name})\n"
    got = machine(kernel("seed", outputs, body), {"seed": np.array([[1234]], np.uint32)})
    bits = got["ref"]
    assert len(np.unique(bits)) > 1000  # random 32-bit values, mostly over every narrow range
    for dst in INTS:
        assert_same(got[f"out_{dst}"], modular(bits, dst), f"rng -> {dst}")


def test_rng_into_fewer_partitions_draws_their_lanes_and_keeps_the_rest(machine):
    """A dst of P < 128 partitions draws lanes 0..P-1 (it used to be an InternalError: the
    instruction wrote back only those lanes' state)."""
    body = (
        "s = nl.ndarray((1, 1), dtype=nl.uint32, buffer=nl.sbuf)\nnisa.dma_copy(dst=s, src=seed)\n"
    )
    for name, p in (("few", P), ("all", RNG_P)):
        body += f"t_{name} = nl.ndarray(({p}, 16), dtype=nl.uint32, buffer=nl.sbuf)\n"
        body += f"nisa.set_rng_seed(s)\nnisa.rng(dst=t_{name})\n"
        body += f"nisa.dma_copy(dst={name}, src=t_{name})\n"
    outputs = [("few", (P, 16), "uint32"), ("all", (RNG_P, 16), "uint32")]
    got = machine(kernel("seed", outputs, body), {"seed": np.array([[99]], np.uint32)})
    assert_same(got["few"], got["all"][:P], "rng lanes")


# ---------------------------------------------------------------------------------------------
# Inferred: bitvec results are bit patterns; exact integer results saturate without fp32.


@pytest.mark.parametrize("dst", INTS)
@pytest.mark.parametrize("src", INTS)
@pytest.mark.parametrize("instr", ["tensor_scalar", "tensor_tensor"])
def test_bitvec_results_are_written_as_bits(machine, instr, src, dst):
    a = edge_values(src)
    shape = a.shape
    op = (
        "nisa.tensor_scalar(dst=y, data=x, op0=nl.bitwise_or, operand0=0)"
        if instr == "tensor_scalar"
        else "nisa.tensor_tensor(dst=y, data1=x, data2=x, op=nl.bitwise_or)"
    )
    body = (
        f"x = nl.ndarray({shape}, dtype=nl.{src}, buffer=nl.sbuf)\nnisa.dma_copy(dst=x, src=a)\n"
        f"y = nl.ndarray({shape}, dtype=nl.{dst}, buffer=nl.sbuf)\n{op}\n"
        "nisa.dma_copy(dst=out, src=y)\n"
    )
    got = machine(kernel("a", [("out", shape, dst)], body), {"a": a})["out"]
    assert_same(got, modular(a, dst), f"{instr} bitwise_or {src} -> {dst}")


@pytest.mark.parametrize("dst", ["int32", "uint32"])
@pytest.mark.parametrize("src", ["int32", "uint32"])
def test_gpsimd_integer_results_are_exact_then_saturate(machine, src, dst):
    a = edge_values(src)
    shape = a.shape
    body = (
        f"x = nl.ndarray({shape}, dtype=nl.{src}, buffer=nl.sbuf)\nnisa.dma_copy(dst=x, src=a)\n"
        f"z = nl.ndarray({shape}, dtype=nl.{src}, buffer=nl.sbuf)\nnisa.memset(dst=z, value=0)\n"
        f"y = nl.ndarray({shape}, dtype=nl.{dst}, buffer=nl.sbuf)\n"
        "nisa.tensor_tensor(dst=y, data1=x, data2=z, op=nl.add)\n"  # all int32: GpSimd
        "nisa.dma_copy(dst=out, src=y)\n"
    )
    got = machine(kernel("a", [("out", shape, dst)], body), {"a": a})["out"]
    assert_same(got, saturated(a, dst), f"gpsimd add {src} -> {dst}")


IOTA_N = 8


@pytest.mark.parametrize("dst", DTYPES)
@pytest.mark.parametrize("offset", [2**24 + 1, -3, 2**31 - 4, 200])
def test_iota_values_are_int32_and_cast_to_dst(machine, offset, dst):
    body = (
        f"y = nl.ndarray(({P}, {IOTA_N}), dtype=nl.{dst}, buffer=nl.sbuf)\n"
        f"nisa.iota(dst=y, pattern=[[1, {IOTA_N}]], offset={offset}, channel_multiplier=1)\n"
        "nisa.dma_copy(dst=out, src=y)\n"
    )
    got = machine(
        kernel("a", [("out", (P, IOTA_N), dst)], body), {"a": np.zeros((1, 1), np.float32)}
    )["out"]
    # nki.isa.iota: 32-bit integer arithmetic (wrapping past int32's maximum).
    wide = offset + np.arange(P)[:, None] + np.arange(IOTA_N)[None, :]
    values = modular(wide, "int32")
    want = saturated(values, dst) if dst in INTS else via_fp32(values, dst)
    assert_same(got, want, f"iota offset {offset} -> {dst}")
