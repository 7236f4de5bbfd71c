"""The allocator's result (neuronemu.program.placements): placements kept as the jitted path's
columns behave as a dict of Placement objects made when asked for, and the reuses known by
tensor ids alone are the same pairs as the Placement pairs made from them."""

from __future__ import annotations

import numpy as np
import pytest

from neuronemu.errors import SourceSpan
from neuronemu.ir import ALL_DTYPES, BUFFERS, Tensor
from neuronemu.program.placements import Allocation, Pairs, Placement, Placements

SPAN = SourceSpan("tiles.py", 1, 1)


def _tiles(n: int) -> list[Tensor]:
    tiles = [
        Tensor(f"t{k}", (128, 64), ALL_DTYPES["float32"], BUFFERS["sbuf"], SPAN) for k in range(n)
    ]
    tiles[1].partition_offset = 32
    return tiles


def _columns(tiles: list[Tensor]) -> tuple[np.ndarray, ...]:
    n = len(tiles)
    offset = np.arange(n, dtype=np.int64) * 256
    size = np.full(n, 256, dtype=np.int64)
    first = np.arange(n, dtype=np.int64)
    last = first + 3
    pinned = np.arange(n) % 3 == 0
    return offset, size, first, last, pinned


def test_columns_become_the_placements_a_dict_would_hold():
    tiles = _tiles(6)
    offset, size, first, last, pinned = _columns(tiles)
    lazy = Placements()
    lazy.add_columns(tiles[:4], offset[:4], size[:4], first[:4], last[:4], pinned[:4])
    lazy.add_columns(tiles[4:], offset[4:], size[4:], first[4:], last[4:], pinned[4:])
    want = {
        t.id: (t, int(offset[k]), int(size[k]), int(first[k]), int(last[k]), bool(pinned[k]))
        for k, t in enumerate(tiles)
    }
    assert len(lazy) == 6 and list(lazy) == [t.id for t in tiles]
    assert tiles[2].id in lazy and -1 not in lazy and lazy.get(-1) is None
    p = lazy[tiles[2].id]
    assert lazy[tiles[2].id] is p  # (one object per tile once made)
    for tid, got in lazy.items():
        assert (got.tensor, got.offset, got.size, got.first, got.last, got.pinned) == want[tid]
        assert got.partition == (32 if tid == tiles[1].id else 0)
        assert type(got.offset) is int and type(got.pinned) is bool
    with pytest.raises(KeyError):
        lazy[-1]


def test_placements_set_and_deleted_keep_their_order():
    tiles = _tiles(4)
    lazy = Placements()
    lazy.add_columns(tiles[:3], *(c[:3] for c in _columns(tiles)))
    extra = Placement(tiles[3], 0, 64, 0, 1)
    lazy[tiles[3].id] = extra
    del lazy[tiles[0].id]
    assert list(lazy) == [tiles[1].id, tiles[2].id, tiles[3].id]
    assert lazy[tiles[3].id] is extra and len(lazy) == 3
    replaced = Placement(tiles[1], 512, 64, 0, 1)
    lazy[tiles[1].id] = replaced
    assert lazy[tiles[1].id] is replaced and list(lazy)[0] == tiles[1].id
    with pytest.raises(KeyError):
        del lazy[tiles[0].id]


def test_reuses_by_ids_are_the_placement_pairs():
    tiles = _tiles(5)
    lazy = Placements()
    lazy.add_columns(tiles, *_columns(tiles))
    out = Allocation(lazy)
    ids = [(tiles[0].id, tiles[2].id), (tiles[1].id, tiles[3].id)]
    out.add_reuse_ids(ids)
    out.add_reuse_ids([(tiles[2].id, tiles[4].id)])
    assert out.reuse_ids() == [*ids, (tiles[2].id, tiles[4].id)]
    pairs = out.reuses
    assert [(a.tensor.id, b.tensor.id) for a, b in pairs] == out.reuse_ids()
    assert pairs[0][1] is lazy[tiles[2].id] is pairs[2][0]
    # (pairs added as placements, as the plain path adds them, are in the ids too)
    out.reuses.append((lazy[tiles[3].id], lazy[tiles[4].id]))
    assert out.reuse_ids()[-1] == (tiles[3].id, tiles[4].id) and len(out.reuse_ids()) == 4
    out.add_reuse_ids([(tiles[0].id, tiles[1].id)])
    assert [(a.tensor.id, b.tensor.id) for a, b in out.reuses] == out.reuse_ids()
    assert len(out.reuses) == 5


def test_reuse_pairs_kept_as_an_array_read_as_a_list_of_tuples():
    plain = [(3, 7), (4, 9), (7, 11)]
    pairs = Pairs(np.array(plain, dtype=np.int64))
    assert list(pairs) == plain and pairs == plain and len(pairs) == 3
    assert pairs[1] == (4, 9) and pairs[-1] == (7, 11) and pairs[::2] == plain[::2]
    assert all(type(a) is int for pair in pairs for a in pair)
    assert np.asarray(pairs).tolist() == [list(p) for p in plain]
    assert bool(Pairs(np.zeros((0, 2), np.int64))) is False


def test_columns_in_any_order_of_ids_are_found_by_id():
    # (the allocator adds its tiles in order of first use, not of id)
    tiles = _tiles(5)[::-1]
    offset, size, first, last, pinned = _columns(tiles)
    lazy = Placements()
    lazy.add_columns(tiles, offset, size, first, last, pinned)
    assert [lazy[t.id].offset for t in tiles] == offset.tolist()
    assert [lazy[t.id].tensor for t in tiles] == tiles and len(lazy) == 5


def test_offsets_at_once_are_those_of_the_placements():
    tiles = _tiles(6)
    columns = _columns(tiles)
    lazy = Placements()
    lazy.add_columns(tiles[:3], *(c[:3] for c in columns))
    lazy.add_columns(tiles[3:5], *(c[3:5] for c in columns))
    lazy[tiles[1].id]  # noqa: B018  (made)
    lazy[tiles[3].id] = Placement(tiles[3], 4096, 64, 0, 1)  # (replaced)
    del lazy[tiles[4].id]
    ids = np.array([t.id for t in tiles] + [-7], dtype=np.int64)
    want = [lazy[tid].offset if tid in lazy else -1 for tid in ids.tolist()]
    assert lazy.offsets(ids).tolist() == want
    assert want[3] == 4096 and want[4] == want[5] == want[6] == -1
