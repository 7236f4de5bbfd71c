"""Attacks on `match` (a review of its first version): patterns whose checks or matching took
time quadratic in the pattern or the subject, unmetered, and subjects that were internal
errors. Each now ends within its budgets: run, or a located error."""

from __future__ import annotations

import pytest
from _guard import Sandbox

HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n\n"
BODY = (
    "@nki.jit\ndef k(a):\n{lines}\n"
    "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)\n"
    "    nisa.dma_copy(dst=t, src=a)\n"
    "    nisa.dma_copy(dst=out, src=t)\n"
    "    return out\n"
)


def _kernel(lines: list[str], top: str = "") -> str:
    return HEAD + top + BODY.format(lines="\n".join("    " + line for line in lines))


_KEYS = 20_000
_CASES = {
    # 20,000 literal keys: each checked against every earlier one when parsed (41 s)
    "literal-keys": (
        _kernel(
            [
                "match {}:",
                "    case {" + ", ".join(f"{i}: _" for i in range(_KEYS)) + "}:",
                "        pass",
            ]
        ),
        True,
    ),
    # 20,000 captures in one class pattern: each name looked for in a list when parsed
    "keyword-captures": (
        _kernel(
            ["match 1:", "    case C(" + ", ".join(f"a{i}=b{i}" for i in range(_KEYS)) + "):"]
            + ["        pass"],
            top="class C:\n    pass\n\n\n",
        ),
        True,
    ),
    # 20,000 dotted keys: each compared with every earlier one when matched (18 s)
    "dotted-keys": (
        _kernel(
            [
                "match dict.fromkeys(range(" + str(_KEYS) + "), 0):",
                "    case {" + ", ".join(f"K.a{i}: _" for i in range(_KEYS)) + "}:",
                "        print('matched')",
            ],
            top="class K:\n    pass\n\n\nfor _i in range("
            + str(_KEYS)
            + "):\n    setattr(K, f'a{_i}', _i)\n\n\n",
        ),
        True,
    ),
    # `**rest` of a 900,000-key dict past 200 keys: each item compared with every key (18 s)
    "rest-of-a-large-dict": (
        _kernel(
            [
                "d = dict.fromkeys(range(900000), 0)",
                "match d:",
                "    case {" + ", ".join(f"{i}: _" for i in range(200)) + ", **rest}:",
                "        print(len(rest))",
            ]
        ),
        True,
    ),
    # a key no set can hold: CPython's TypeError, not an internal error
    "unhashable-value-key": (
        _kernel(
            ["match {1: 1, 2: 2}:", "    case {1: 1, K.A: 2}:", "        pass"],
            top="import numpy as np\n\n\nclass K:\n    A = np.array([1, 2])\n\n\n",
        ),
        False,
    ),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_a_match_attack_ends_within_its_budgets(tmp_path, case):
    source, may_run = _CASES[case]
    box = Sandbox(tmp_path)
    box.write("k.py", source)
    out = box.run("run", "k.py", "-i", "a=float32[128,8]", "--timing-only")
    if may_run and out.returncode == 0:
        out.assert_confined()
    else:
        out.assert_located("k.py")
