"""nc_match_replace8: dst = data with the first occurrence of each of 8 vals replaced by imm;
dst_idx (optional) gets the matched positions. Vector engine.

Ref: nki.isa.nc_match_replace8 (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/
api/generated/nki.isa.nc_match_replace8.html). Free axes are flattened; data has at most 16,384
elements per partition, vals exactly 8. vals are processed in reverse order (7 .. 0), each
taking the first matching position not taken yet, so equal vals pair with ascending positions
from the highest dst_idx column down. A val with no match leaves data alone; its dst_idx slot
is the all-ones sentinel (inferred: the docs leave it undefined). Compared as fp32 (inferred).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    claim_matches,
    f32,
    rows,
    streaming_cycles,
    top8_checks,
)
from neuronemu_isa.spec import (
    ON_CHIP,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    same_free_size,
    same_partition_size,
)

NOT_FOUND = 0xFFFFFFFF


def semantics(data, vals, *, imm):
    x = rows(f32(data))
    found = claim_matches(x, rows(f32(vals)), range(7, -1, -1))
    out = x.copy()
    p, j = np.nonzero(found >= 0)
    out[p, found[p, j]] = np.float32(imm)
    return {"dst": out, "dst_idx": np.where(found < 0, NOT_FOUND, found)}


def cost(c: Check) -> int:
    # ISA-old prints "min(MIN_II, N)"; read as max(MIN_II, N) like every other Vector cost.
    data = c.tile("data")
    return streaming_cycles(c, data.free_size, data, c.tile("dst"))


def _imm_is_number(c: Check) -> str | None:
    v = c.attrs.get("imm")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"imm {v!r} must be an fp32 number"
    return None


SPEC = InstrSpec(
    name="nc_match_replace8",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP),
        Out("dst_idx", *ON_CHIP, optional=True),
        In("data", *ON_CHIP),
        In("vals", *ON_CHIP),
    ),
    attrs=(Attr("imm"),),
    constraints=(
        same_partition_size("dst", "data", "vals", "dst_idx"),
        same_free_size("dst", "data"),
        top8_checks("data", "dst_idx", min_free=False, vals="vals"),
        _imm_is_number,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data", "vals", "imm", "dst_idx"),
)
