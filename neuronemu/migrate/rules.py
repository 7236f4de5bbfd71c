"""The deprecated and removed NKI constructs neuronemu knows: what each is, the NKI version
that removed or deprecated it, its replacement, and whether `migrate` rewrites it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "Rule"]


@dataclass(frozen=True)
class Rule:
    name: str  # short id, shown in brackets after a finding
    what: str  # the construct, as a noun phrase
    status: str  # "removed in NKI 0.2.0", "deprecated in NKI 0.7.0", ...
    instead: str  # the replacement
    mechanical: bool  # `migrate` rewrites it (else it marks the place)


# Every status and replacement below is from the AWS Neuron docs, `nki/migration/index.rst`
# ("NKI Migration Guides", v2.32.0-v2.33.1), unless its comment says otherwise.
RULES: dict[str, Rule] = {
    # "Usage of the neuronxcc.nki.* namespace inside NKI kernels raises a compilation error as
    # of NKI 0.4.0"; Neuron 2.34 removed the namespace from neuronx-cc
    # (announce-removal-neuronxcc-nki-2-34.rst).
    "namespace": Rule(
        "namespace",
        "the neuronxcc.nki namespace",
        "removed in Neuron 2.34 (an error inside kernels since NKI 0.4.0)",
        "import nki, nki.language as nl, nki.isa as nisa",
        True,
    ),
    # Migrating from 0.1.0 to 0.2.0: "In NKI 0.2.0, nl.load and nl.store were removed in
    # favor of nisa.dma_copy. They were later reintroduced in NKI 0.3.0 as convenience APIs".
    # Not a lint finding (they exist in NKI 0.7); `migrate` makes the transfer explicit.
    "load": Rule(
        "load",
        "nl.load",
        "removed in NKI 0.2.0 (a convenience wrapper again since 0.3.0)",
        "nl.ndarray(..., buffer=nl.sbuf) and nisa.dma_copy(dst=..., src=...)",
        True,
    ),
    "store": Rule(
        "store",
        "nl.store",
        "removed in NKI 0.2.0 (a convenience wrapper again since 0.3.0)",
        "nisa.dma_copy(dst=..., src=...)",
        True,
    ),
    # 0.2.0: "arange has been removed, use slicing or NKI access patterns" (mgrid alike:
    # "Update indexing syntax for mgrid and arange").
    "arange": Rule(
        "arange",
        "nl.arange/nl.mgrid index expressions",
        "removed in NKI 0.2.0",
        "integer slices (start:stop, bounded with min() for a ragged tile) or an access "
        "pattern, t.ap(...)",
        False,
    ),
    # 0.2.0: "The mask parameter is no longer supported" ("Deprecation of masking").
    "mask": Rule(
        "mask",
        "mask=",
        "removed in NKI 0.2.0",
        "slices that stay in bounds, e.g. rows lo:min(lo + 128, n)",
        False,
    ),
    # 0.2.0: "Explicit dst parameter is now required for nki.isa instructions and is always
    # the first argument".
    "dst": Rule(
        "dst",
        "a value-returning nisa call",
        "removed in NKI 0.2.0",
        "a result allocated with nl.ndarray, passed as the first argument (dst)",
        False,
    ),
    # As "dst"; 0.3.0 "Matmul accumulation": nc_matmul(dst, stationary, moving,
    # accumulate=True) accumulates on dst.
    "accumulate": Rule(
        "accumulate",
        "psum += nisa.<call>(...)",
        "removed in NKI 0.2.0",
        "nisa.<call>(psum, ..., accumulate=True)",
        True,
    ),
    # "Removing block dimensions from NKI kernels" (the note atop the migration guides).
    "block_dims": Rule(
        "block_dims",
        "a block dimension (nl.par_dim after other dims)",
        "removed in NKI 0.2.0",
        "the partition dim first, the blocks in a Python list of tiles or folded into the "
        "free dims",
        False,
    ),
    # Same section: with the partition dim first, nl.par_dim marks nothing (inferred: the
    # 0.2.0 examples write the partition size as a plain int).
    "par_dim": Rule(
        "par_dim",
        "nl.par_dim(n)",
        "removed with block dimensions in NKI 0.2.0",
        "the plain size n",
        True,
    ),
    # 0.7.0 ("Updated Kernel Specialization"): affine_range, sequential_range and
    # static_range are deprecated aliases of range (the reference's NKI-versions table).
    "range": Rule(
        "range",
        "nl.affine_range/sequential_range/static_range",
        "deprecated in NKI 0.7.0",
        "range",
        True,
    ),
    # 0.6.0: "Deprecated: dynamic nl.dynamic_range and while loops" -> fori_loop(); removed in
    # 0.7.0 ("removes the dynamic loop constructs deprecated in NKI 0.6.0").
    "dynamic_range": Rule(
        "dynamic_range",
        "nl.dynamic_range",
        "removed in NKI 0.7.0",
        "nl.fori_loop(start, stop, body) with the loop body as a function",
        False,
    ),
    # announce-intent-eos-nki-virtualregister-lnc-apis.rst: NKI 0.8.0 (Neuron 2.34) deprecates
    # register_alloc/move/load/store and VirtualRegister.
    "register": Rule(
        "register",
        "nisa.register_* (VirtualRegister)",
        "deprecated in NKI 0.8.0",
        "nisa.scalar_load/nisa.scalar_store with an NkiScalar",
        False,
    ),
    # 0.3.0 -> 0.4.0: "tensor_copy_dynamic_src / tensor_copy_dynamic_dst - removed".
    "copy_dynamic": Rule(
        "copy_dynamic",
        "nisa.tensor_copy_dynamic_src/dst",
        "removed in NKI 0.4.0",
        "nisa.tensor_copy with t.ap(..., scalar_offset=...)",
        False,
    ),
    # 0.3.0 -> 0.4.0: "tile_size.total_available_sbuf_size - deprecated".
    "sbuf_size": Rule(
        "sbuf_size",
        "nl.tile_size.total_available_sbuf_size",
        "deprecated in NKI 0.4.0",
        "nl.tile_size.sbuf_fmax_bytes (per partition) or sbuf_size_bytes (all partitions)",
        False,
    ),
    # 0.2.0 -> 0.3.0: "String buffer names no longer supported".
    "buffer_string": Rule(
        "buffer_string",
        "a buffer named by a string",
        "removed in NKI 0.3.0",
        "the buffer object, nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm",
        True,
    ),
    # 0.2.0 -> 0.3.0: nki.jit(mode=...) and nki.jit(platform_target=...) deprecated, an error.
    "jit_args": Rule(
        "jit_args",
        "nki.jit(mode=...) / nki.jit(platform_target=...)",
        "removed in NKI 0.3.0",
        "@nki.jit without them (NEURON_PLATFORM_TARGET_OVERRIDE for the target)",
        False,
    ),
    # 0.1.0 -> 0.2.0: "Decorators on sub-kernels need to be removed".
    "sub_kernel": Rule(
        "sub_kernel",
        "@nki.jit on a kernel another kernel calls",
        "removed in NKI 0.2.0",
        "a plain function (apply nki.jit at a standalone call site)",
        False,
    ),
    # 0.2.0 -> 0.3.0: "All kernel output (return) tensors must be allocated with
    # buffer=nl.shared_hbm"; that outputs are no longer passed in is inferred from it (the
    # guides' kernels all allocate and return their outputs).
    "output_args": Rule(
        "output_args",
        "a kernel that returns nothing (outputs passed as arguments)",
        "removed in NKI 0.2.0 (inferred)",
        "outputs allocated with nl.ndarray(..., buffer=nl.shared_hbm) and returned",
        False,
    ),
}
