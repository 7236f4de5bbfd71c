"""Replayed loops: a loop whose iterations differ only by constant steps is traced for three
iterations and the rest are made from the last one, exactly as unrolling would make them.
The feature whole, its modules at the levels of the stages they serve (the house test
places each): `journal` (the record of an iteration being traced, which the builder and the
interpreter write to; the lowest), `repeats` (the builder's part that makes a replayed
iteration's instructions and their dependencies), and `plans`, `moving` and `templates`
(the tracer's side: what two recorded iterations share, the values a replay makes, and the
loop traced in part). This file imports nothing, so that importing `journal` from below
runs nothing of the levels above."""
