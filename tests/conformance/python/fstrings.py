# ruff: noqa: E501 - program text: long lines are the programs' own
"""f-strings and format specs: fill, align, sign, width, precision, grouping, the presentation
types, `!r`/`!s`, `=`, nested fields, and `format()`."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["align_and_fill"] = """
def main():
    s = "ab"
    print(f"[{s:<6}] [{s:>6}] [{s:^6}] [{s:*^7}] [{s:-<4}] [{7:>4}] [{7:<4}] [{7:^5}]")
"""

PROGRAMS["sign_and_zero_padding"] = """
def main():
    for v in (5, -5):
        print(f"{v:+d} {v: d} {v:-d} {v:05d} {v:+06d} {v:=+6}")
"""

PROGRAMS["float_precision_and_types"] = """
def main():
    x = 1234.56789
    print(f"{x:.2f} {x:10.3f} {x:e} {x:.3e} {x:g} {x:.3g} {x:%} {0.25:.1%} {x:.0f}")
"""

PROGRAMS["integer_bases"] = """
def main():
    n = 255
    print(f"{n:b} {n:o} {n:x} {n:X} {n:#b} {n:#o} {n:#x} {n:08b} {n:c}")
"""

PROGRAMS["grouping_separators"] = """
def main():
    print(f"{1234567:,} {1234567:_} {1234567.891:,.2f} {0xFFFFFF:_x} {-9876543:,}")
"""

PROGRAMS["conversions_r_s_a"] = """
def main():
    s = "q'"
    print(f"{s!r} {s!s} {s!a} {'é'!a} {[1, 'x']!r}")
"""

PROGRAMS["self_documenting_equals"] = """
def main():
    x, name = 3, "tile"
    print(f"{x=} {name=} {x * 2=} {x=:>4}")
"""

PROGRAMS["nested_format_fields"] = """
def main():
    width, prec = 8, 3
    v = 3.14159265
    print(f"[{v:{width}.{prec}f}] [{'x':>{width}}] [{v:{'^'}{width}}]")
"""

PROGRAMS["braces_escaped"] = """
def main():
    print(f"{{}} {{x}} {{{1 + 1}}}")
"""

PROGRAMS["expressions_inside_fields"] = """
def main():
    xs = [1, 2, 3]
    d = {"k": "v"}
    print(f"{len(xs)} {xs[-1]} {d['k']} {sum(x * x for x in xs)} {'yes' if xs else 'no'}")
"""

PROGRAMS["format_builtin"] = """
def main():
    print(format(3.14159, ".2f"), format(42, "08b"), format("s", ">3"), format(1e6, ","),
          format(12, ""), format(0.5, "%"))
"""

PROGRAMS["str_format_with_index"] = """
def main():
    print("{0[0]} {0[1]}".format(["a", "b"]), "{k[n]}".format(k={"n": 5}))
"""

# Refused by the trust rules, with the located error neuronemu gives instead (and
# docs/limitations.md lists): what CPython runs, a kernel may not.
REFUSED: dict[str, tuple[str, str]] = {}

# A format field that reads an attribute walks objects by name inside a string: the classic
# way out of a sandbox (`"{0.__class__.__mro__}"`), so no attribute is read there at all.
REFUSED["str_format_reads_an_attribute"] = (
    """
class P:
    x = 4

def main():
    print("{0.x}".format(P()))
""",
    "reading the attribute 'x' in a format field is not available",
)

PROGRAMS["multiline_and_concatenated_fstrings"] = """
def main():
    a, b = 1, 2
    s = (f"a={a} "
         f"b={b} "
         "plain")
    print(s)
"""

PROGRAMS["format_of_none_bool_and_containers"] = """
def main():
    print(f"{None} {True} {False:>6} {[1, 2]} {(1,)} {{'k': 1}}")
"""

PROGRAMS["float_rounding_in_format"] = """
def main():
    print(f"{2.5:.0f} {3.5:.0f} {0.125:.2f} {0.375:.2f} {1.005:.2f} {-0.0:.1f}")
"""

PROGRAMS["format_with_width_from_len"] = """
def main():
    rows = [("name", 3), ("longer", 10)]
    w = max(len(n) for n, _ in rows)
    for n, v in rows:
        print(f"{n:<{w}} | {v:>4}")
"""

PROGRAMS["format_general_and_exponent_boundaries"] = """
def main():
    for v in (1e-5, 1e-4, 123456.0, 1234567.0, 1e16, 0.0):
        print(f"{v:g} {v} {v:.2e}")
"""

PROGRAMS["int_format_with_precision_error"] = """
def main():
    try:
        print(f"{5:.2d}")
    except ValueError as e:
        print("ValueError", e)
"""

PROGRAMS["format_user_class_with_dunder_format"] = """
class Money:
    def __init__(self, v):
        self.v = v
    def __format__(self, spec):
        return f"${self.v:{spec or '.2f'}}"

def main():
    print(f"{Money(3)} {Money(2.5):.1f}")
"""

PROGRAMS["string_methods_inside_fstring"] = """
def main():
    name = "kernel"
    print(f"{name.upper()} {name[:3]!r} {name.center(10, '.')}")
"""
