"""The allocator's placement (neuronemu.build.allocator) over flat arrays: the plain twin that
neuronemu.jit.compiled jits (`_jit.place`), for programs past the allocator's JIT threshold when
every tile fits (spills and errors take the allocator's own path). The same placements,
reuses and peak as the allocator's (a property test compares them)."""

from __future__ import annotations

import numpy as np

__all__ = ["_place_py"]


def _place_py(
    first,
    last,
    size,
    step,
    qmask,
    pin,
    n_quadrants,
    capacity,
    rotate,
    res_lo,
    res_hi,
    res_qmask,
    res_first,
    res_last,
):
    """Offsets of tiles taken in the allocator's order (by first use, then id), each live over
    [first, last], `size` bytes per partition at a multiple of `step`, over the quadrants of
    `qmask` (bit q: quadrant q), at `pin` when the kernel placed it (else -1); automatic
    placements keep clear of the reserved ranges (the placed tiles' bytes over their live
    ranges). Returns (offset, reuse_old, reuse_new, peak, failed): the reuses in the
    allocator's order; `failed`: the first tile that does not fit or is placed wrongly (its
    error and any spills are the allocator's to make), else -1.

    Per quadrant, sorted disjoint segments [start, end) -> the tile that last held them (the
    allocator's _ByteMap), in arrays with a gap: where the last tile went in (`gap_at`, a
    segment index; `gaps` entries long), as a text editor keeps its buffer. Placement
    rotates, so the next tile most often goes in just after the last: a list without a gap
    moved every segment after it (tiles of a few bytes, tens of thousands of segments per
    lap of the ring: most of the placement's time). A fit is its _fit (next fit from the
    ring cursor, wrapping once)."""

    def right(seg_s, q, n, gap_at, gap, off):
        """np.searchsorted(side="right") of `off` among quadrant q's `n` segment starts."""
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if seg_s[q, mid if mid < gap_at else mid + gap] <= off:
                lo = mid + 1
            else:
                hi = mid
        return lo

    n = first.shape[0]
    offset = np.full(n, -1, dtype=np.int64)
    cap = 8  # (segments per quadrant, gaps included, doubled as needed)
    seg_s = np.zeros((n_quadrants, cap), dtype=np.int64)
    seg_e = np.zeros((n_quadrants, cap), dtype=np.int64)
    seg_o = np.zeros((n_quadrants, cap), dtype=np.int64)
    n_seg = np.zeros(n_quadrants, dtype=np.int64)
    gap_at = np.zeros(n_quadrants, dtype=np.int64)
    gaps = np.full(n_quadrants, cap, dtype=np.int64)
    in_use = np.zeros(n_quadrants, dtype=np.int64)
    cursors = np.zeros(n_quadrants, dtype=np.int64)
    new_s = np.zeros(3, dtype=np.int64)  # (the segments that replace those a tile overlaps)
    new_e = np.zeros(3, dtype=np.int64)
    new_o = np.zeros(3, dtype=np.int64)
    seen = np.full(n, -1, dtype=np.int64)  # the tile whose reuses last listed this one
    r_lo = np.zeros(res_lo.shape[0], dtype=np.int64)
    r_hi = np.zeros(res_lo.shape[0], dtype=np.int64)
    reuse_old = np.zeros(max(n, 1), dtype=np.int64)
    reuse_new = np.zeros(max(n, 1), dtype=np.int64)
    n_reuse = 0
    by_last = np.argsort(last, kind="mergesort")
    released = 0
    peak = 0
    cursor = 0
    # While every tile spans every quadrant (most programs), the quadrants' maps are the
    # same: quadrant 0's stands for all (`nq` maps kept), until a tile spans fewer.
    every = (1 << n_quadrants) - 1
    nq = 1
    for i in range(n):
        now = first[i]
        m = qmask[i]
        sz = size[i]
        st = step[i]
        if nq == 1 and m != every:
            for q in range(1, n_quadrants):
                n_seg[q] = n_seg[0]
                gap_at[q] = gap_at[0]
                gaps[q] = gaps[0]
                seg_s[q, :] = seg_s[0, :]
                seg_e[q, :] = seg_e[0, :]
                seg_o[q, :] = seg_o[0, :]
            nq = n_quadrants
        # Tiles dead before this one begins let their bytes go.
        while released < n and last[by_last[released]] < now:
            d = by_last[released]
            for q in range(n_quadrants):
                if (qmask[d] >> q) & 1:
                    in_use[q] -= size[d]
            released += 1
        found = -1
        if pin[i] >= 0:
            found = pin[i]
            if found % st or found + sz > capacity:
                return offset, reuse_old[:n_reuse], reuse_new[:n_reuse], peak, i
            for q in range(nq):  # (a live tile over the bytes: the allocator's error)
                if (m >> q) & 1:
                    k = 0
                    while k < n_seg[q]:
                        p = k if k < gap_at[q] else k + gaps[q]
                        if seg_s[q, p] >= found + sz:
                            break
                        if seg_e[q, p] > found and last[seg_o[q, p]] >= now:
                            return offset, reuse_old[:n_reuse], reuse_new[:n_reuse], peak, i
                        k += 1
        else:
            n_res = 0
            for r in range(res_lo.shape[0]):
                if res_qmask[r] & m and res_first[r] <= last[i] and now <= res_last[r]:
                    r_lo[n_res] = res_lo[r]
                    r_hi[n_res] = res_hi[r]
                    n_res += 1
            start = cursor if rotate else 0
            for attempt in range(2):  # [start, capacity), then [0, start)
                if attempt == 1 and (found >= 0 or start == 0):
                    break
                lo = start if attempt == 0 else 0
                hi = capacity if attempt == 0 else start
                off = -(-lo // st) * st
                for q in range(nq):
                    if (m >> q) & 1:
                        k = right(seg_s, q, n_seg[q], gap_at[q], gaps[q], off) - 1
                        cursors[q] = max(k, 0)
                while off < hi and off + sz <= capacity:
                    end = off + sz
                    jump = -1
                    for q in range(nq):
                        if not (m >> q) & 1:
                            continue
                        ns, g0, g = n_seg[q], gap_at[q], gaps[q]
                        k = cursors[q]
                        while k < ns and seg_e[q, k if k < g0 else k + g] <= off:
                            k += 1
                        cursors[q] = k
                        while k < ns:
                            p = k if k < g0 else k + g
                            if seg_s[q, p] >= end:
                                break
                            o = seg_o[q, p]
                            if last[o] >= now:  # (a live tile blocks every offset to its end)
                                jump = max(jump, offset[o] + size[o])
                                break
                            k += 1
                    for r in range(n_res):
                        if r_lo[r] < end and off < r_hi[r]:
                            jump = max(jump, r_hi[r])
                    if jump < 0:
                        found = off
                        break
                    off = -(-jump // st) * st
            if found < 0:
                return offset, reuse_old[:n_reuse], reuse_new[:n_reuse], peak, i
        offset[i] = found
        end = found + sz
        # The tiles that last held these bytes (each once, by quadrant then address).
        for q in range(nq):
            if not (m >> q) & 1:
                continue
            ns, g0, g = n_seg[q], gap_at[q], gaps[q]
            k = max(right(seg_s, q, ns, g0, g, found) - 1, 0)
            while k < ns:
                p = k if k < g0 else k + g
                if seg_s[q, p] >= end:
                    break
                o = seg_o[q, p]
                if seg_e[q, p] > found and seen[o] != i:
                    seen[o] = i
                    if n_reuse == reuse_old.shape[0]:
                        reuse_old = np.concatenate((reuse_old, np.zeros_like(reuse_old)))
                        reuse_new = np.concatenate((reuse_new, np.zeros_like(reuse_new)))
                    reuse_old[n_reuse] = o
                    reuse_new[n_reuse] = i
                    n_reuse += 1
                k += 1
        # ... and are now this tile's: its segment replaces those it overlaps, whose parts
        # outside it stay.
        if n_seg.max() + 2 > cap:  # (every gap made `cap` longer)
            grown = 2 * cap
            s2 = np.zeros((n_quadrants, grown), dtype=np.int64)
            e2 = np.zeros((n_quadrants, grown), dtype=np.int64)
            o2 = np.zeros((n_quadrants, grown), dtype=np.int64)
            for q in range(n_quadrants):
                g0, after = gap_at[q], gap_at[q] + gaps[q]
                s2[q, :g0] = seg_s[q, :g0]
                e2[q, :g0] = seg_e[q, :g0]
                o2[q, :g0] = seg_o[q, :g0]
                s2[q, after + cap :] = seg_s[q, after:]
                e2[q, after + cap :] = seg_e[q, after:]
                o2[q, after + cap :] = seg_o[q, after:]
                gaps[q] += cap
            seg_s, seg_e, seg_o, cap = s2, e2, o2, grown
        for q in range(nq):
            if not (m >> q) & 1:
                continue
            ns, g0, g = n_seg[q], gap_at[q], gaps[q]
            k = max(right(seg_s, q, ns, g0, g, found) - 1, 0)
            while k < ns and seg_e[q, k if k < g0 else k + g] <= found:
                k += 1
            j = k
            c = 0
            tail = -1  # (the overlapped segment that ends after the tile, if any)
            while j < ns:
                p = j if j < g0 else j + g
                if seg_s[q, p] >= end:
                    break
                if seg_s[q, p] < found:  # (it starts before the tile: its part before stays)
                    new_s[c] = seg_s[q, p]
                    new_e[c] = found
                    new_o[c] = seg_o[q, p]
                    c += 1
                if seg_e[q, p] > end:
                    tail = p
                j += 1
            new_s[c] = found
            new_e[c] = end
            new_o[c] = i
            c += 1
            if tail >= 0:
                new_s[c] = end
                new_e[c] = seg_e[q, tail]
                new_o[c] = seg_o[q, tail]
                c += 1
            # The gap moved to segment k (what lies between moves across it), the segments
            # the tile overlaps (k to j, now just after the gap) dropped into it, and the new
            # ones written at its start.
            if k < g0:
                for t in range(g0 - 1, k - 1, -1):
                    seg_s[q, t + g] = seg_s[q, t]
                    seg_e[q, t + g] = seg_e[q, t]
                    seg_o[q, t + g] = seg_o[q, t]
            else:
                for t in range(g0, k):
                    seg_s[q, t] = seg_s[q, t + g]
                    seg_e[q, t] = seg_e[q, t + g]
                    seg_o[q, t] = seg_o[q, t + g]
            g += j - k
            for t in range(c):
                seg_s[q, k + t] = new_s[t]
                seg_e[q, k + t] = new_e[t]
                seg_o[q, k + t] = new_o[t]
            gap_at[q] = k + c
            gaps[q] = g - c
            n_seg[q] = ns + c - (j - k)
        for q in range(n_quadrants):
            if (m >> q) & 1:
                in_use[q] += sz
                peak = max(peak, in_use[q])
        cursor = end if rotate else 0
    return offset, reuse_old[:n_reuse], reuse_new[:n_reuse], peak, -1
