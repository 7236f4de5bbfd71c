"""What `journal.marked` finds: a value the loop being recorded marked, looked for inside the
containers and slices that hold it, and never at more than MARKED_SCAN_ITEMS items
(past them: counted as marked, so that a replay is refused rather than wrong)."""

from __future__ import annotations

from neuronemu.replay import journal
from neuronemu.replay.journal import Affine, Opaque, marked


def test_marks_are_found_inside_what_holds_them():
    assert marked(1, "x", 2.5) is None
    assert marked([1, (2, Affine(3))]) is Affine
    assert marked({"k": {Affine(1)}}) is Affine
    assert marked({Affine(1): 0}, [Opaque(2)]) is Opaque  # (Opaque wins)
    assert marked(slice(None, Opaque(4))) is Opaque


def test_a_container_past_the_scan_counts_as_marked():
    plain = list(range(journal.MARKED_SCAN_ITEMS + 1))
    assert marked(plain) is Opaque
    assert marked(plain[: journal.MARKED_SCAN_ITEMS // 2]) is None
    loop: list = []
    loop.append(loop)  # (holds itself: the scan ends all the same)
    assert marked(loop) is Opaque
