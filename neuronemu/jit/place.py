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
    allocator's _ByteMap); a fit is its _fit (next fit from the ring cursor, wrapping once)."""
    n = first.shape[0]
    offset = np.full(n, -1, dtype=np.int64)
    cap = 8  # (segments per quadrant, doubled as needed)
    seg_s = np.zeros((n_quadrants, cap), dtype=np.int64)
    seg_e = np.zeros((n_quadrants, cap), dtype=np.int64)
    seg_o = np.zeros((n_quadrants, cap), dtype=np.int64)
    n_seg = np.zeros(n_quadrants, dtype=np.int64)
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
                    while k < n_seg[q] and seg_s[q, k] < found + sz:
                        if seg_e[q, k] > found and last[seg_o[q, k]] >= now:
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
                        k = np.searchsorted(seg_s[q, : n_seg[q]], off, side="right") - 1
                        cursors[q] = max(k, 0)
                while off < hi and off + sz <= capacity:
                    end = off + sz
                    jump = -1
                    for q in range(nq):
                        if not (m >> q) & 1:
                            continue
                        k = cursors[q]
                        while k < n_seg[q] and seg_e[q, k] <= off:
                            k += 1
                        cursors[q] = k
                        while k < n_seg[q] and seg_s[q, k] < end:
                            o = seg_o[q, k]
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
            k = max(int(np.searchsorted(seg_s[q, : n_seg[q]], found, side="right")) - 1, 0)
            while k < n_seg[q] and seg_s[q, k] < end:
                o = seg_o[q, k]
                if seg_e[q, k] > found and seen[o] != i:
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
        if n_seg.max() + 2 > cap:
            grown = 2 * cap
            s2 = np.zeros((n_quadrants, grown), dtype=np.int64)
            e2 = np.zeros((n_quadrants, grown), dtype=np.int64)
            o2 = np.zeros((n_quadrants, grown), dtype=np.int64)
            s2[:, :cap] = seg_s
            e2[:, :cap] = seg_e
            o2[:, :cap] = seg_o
            seg_s, seg_e, seg_o, cap = s2, e2, o2, grown
        for q in range(nq):
            if not (m >> q) & 1:
                continue
            ns = n_seg[q]
            k = max(int(np.searchsorted(seg_s[q, :ns], found, side="right")) - 1, 0)
            while k < ns and seg_e[q, k] <= found:
                k += 1
            j = k
            left = -1  # the overlapped segment that starts before this tile
            right = -1  # ... and the one that ends after it
            while j < ns and seg_s[q, j] < end:
                if seg_s[q, j] < found:
                    left = j
                if seg_e[q, j] > end:
                    right = j
                j += 1
            c = 0
            if left >= 0:
                new_s[c] = seg_s[q, left]
                new_e[c] = found
                new_o[c] = seg_o[q, left]
                c += 1
            new_s[c] = found
            new_e[c] = end
            new_o[c] = i
            c += 1
            if right >= 0:
                new_s[c] = end
                new_e[c] = seg_e[q, right]
                new_o[c] = seg_o[q, right]
                c += 1
            shift = c - (j - k)
            if shift > 0:
                for t in range(ns - 1, j - 1, -1):
                    seg_s[q, t + shift] = seg_s[q, t]
                    seg_e[q, t + shift] = seg_e[q, t]
                    seg_o[q, t + shift] = seg_o[q, t]
            elif shift < 0:
                for t in range(j, ns):
                    seg_s[q, t + shift] = seg_s[q, t]
                    seg_e[q, t + shift] = seg_e[q, t]
                    seg_o[q, t + shift] = seg_o[q, t]
            for t in range(c):
                seg_s[q, k + t] = new_s[t]
                seg_e[q, k + t] = new_e[t]
                seg_o[q, k + t] = new_o[t]
            n_seg[q] = ns + shift
        for q in range(n_quadrants):
            if (m >> q) & 1:
                in_use[q] += sz
                peak = max(peak, in_use[q])
        cursor = end if rotate else 0
    return offset, reuse_old[:n_reuse], reuse_new[:n_reuse], peak, -1
