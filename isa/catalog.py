"""Every instruction name `nki.isa` documents (Neuron 2.33, NKI 0.7; nki/api/nki.isa.rst and
the 0.2-0.7 release notes), modelled or not: a kernel naming one that neuronemu does not model
yet gets "not supported by neuronemu yet" rather than "no attribute". The modelled ones are
the specs of `instructions/`; the rest is derived (`NOT_YET`)."""

from __future__ import annotations

__all__ = ["NKI_ISA", "not_yet"]

NKI_ISA = tuple(
    """
    activation activation_reduce activate2 affine_select bn_aggr bn_stats core_barrier
    dma_compute dma_copy dma_transpose dropout exponential iota local_gather max8 memset
    nc_find_index8 nc_match_replace8 nc_matmul nc_matmul_mx nc_n_gather nc_stream_shuffle
    nc_transpose nonzero_with_count quantize_mx rand2 rand_get_state rand_set_state
    range_select reciprocal register_alloc register_load register_move register_store rng
    scalar_load scalar_store scalar_tensor_tensor select_reduce sendrecv sendrecv_compute
    sequence_bounds set_rng_seed tensor_copy tensor_copy_predicated tensor_partition_reduce
    tensor_reduce tensor_scalar tensor_scalar_cumulative tensor_scalar_reduce tensor_tensor
    tensor_tensor_scan topk
""".split()
)


def not_yet(modelled: object) -> tuple[str, ...]:
    """The documented names not among `modelled` (a registry: names to specs)."""
    return tuple(name for name in NKI_ISA if name not in modelled)  # type: ignore[operator]
