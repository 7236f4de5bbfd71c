# ruff: noqa: E501 - program text: long lines are the programs' own
"""Exceptions: raising and catching, the class hierarchy, `else` and `finally` order,
re-raising, chaining with `from`, `__cause__` and `__context__`, exceptions in loops."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["try_except_else_finally_order"] = """
def run(fail):
    log = []
    try:
        log.append("try")
        if fail:
            raise ValueError("x")
    except ValueError:
        log.append("except")
    else:
        log.append("else")
    finally:
        log.append("finally")
    return log

def main():
    print(run(False), run(True))
"""

PROGRAMS["finally_runs_on_return"] = """
def f(log):
    try:
        return "try"
    finally:
        log.append("finally")

def main():
    log = []
    print(f(log), log)
"""

PROGRAMS["finally_return_overrides"] = """
def f():
    try:
        return 1
    finally:
        return 2

def g():
    try:
        raise KeyError
    finally:
        return "swallowed"

def main():
    print(f(), g())
"""

PROGRAMS["finally_on_break_and_continue"] = """
def main():
    log = []
    for i in range(3):
        try:
            if i == 0:
                continue
            if i == 2:
                break
            log.append(i)
        finally:
            log.append(f"f{i}")
    print(log)
"""

PROGRAMS["nested_finally_order"] = """
def main():
    log = []
    try:
        try:
            try:
                raise ValueError
            finally:
                log.append(1)
        finally:
            log.append(2)
    except ValueError:
        log.append(3)
    finally:
        log.append(4)
    print(log)
"""

PROGRAMS["bare_raise_reraises"] = """
def main():
    try:
        try:
            raise KeyError("inner")
        except KeyError:
            print("logging")
            raise
    except KeyError as e:
        print("outer got", e.args)
"""

PROGRAMS["raise_from_sets_cause"] = """
def main():
    try:
        try:
            {}["k"]
        except KeyError as e:
            raise ValueError("converted") from e
    except ValueError as e:
        print(e, type(e.__cause__).__name__, e.__cause__.args)
"""

PROGRAMS["implicit_context"] = """
def main():
    try:
        try:
            1 / 0
        except ZeroDivisionError:
            raise RuntimeError("during handling")
    except RuntimeError as e:
        print(e, type(e.__context__).__name__, e.__cause__)
"""

PROGRAMS["raise_from_none"] = """
def main():
    try:
        try:
            [][0]
        except IndexError:
            raise KeyError("clean") from None
    except KeyError as e:
        print(e.__cause__, e.__suppress_context__)
"""

PROGRAMS["exception_hierarchy_catching"] = """
def main():
    out = []
    for exc in (KeyError("k"), IndexError(1), ZeroDivisionError(), ValueError(), TypeError()):
        try:
            raise exc
        except LookupError:
            out.append("lookup")
        except ArithmeticError:
            out.append("arith")
        except (ValueError, TypeError) as e:
            out.append(type(e).__name__)
    print(out)
"""

PROGRAMS["catch_exception_base"] = """
def main():
    try:
        raise NotImplementedError("todo")
    except Exception as e:
        print(type(e).__name__, isinstance(e, RuntimeError), str(e))
"""

PROGRAMS["exception_args_and_str"] = """
def main():
    for e in (ValueError(), ValueError("one"), ValueError("a", 2), KeyError("k")):
        print(repr(str(e)), e.args)
"""

PROGRAMS["exception_repr"] = """
def main():
    print(repr(ValueError("x")), repr(KeyError()), repr(RuntimeError(1, 2)))
"""

PROGRAMS["custom_exception_hierarchy"] = """
class KernelError(Exception):
    pass

class ShapeError(KernelError):
    pass

class DtypeError(KernelError):
    pass

def check(kind):
    if kind == "shape":
        raise ShapeError("bad shape")
    if kind == "dtype":
        raise DtypeError("bad dtype")

def main():
    for kind in ("shape", "dtype", "ok"):
        try:
            check(kind)
            print("ok")
        except ShapeError as e:
            print("shape:", e)
        except KernelError as e:
            print("other:", type(e).__name__, e)
"""

PROGRAMS["exception_variable_is_cleared"] = """
def main():
    e = "before"
    try:
        raise ValueError
    except ValueError as e:
        pass
    try:
        print(e)
    except NameError:
        print("e was cleared")
"""

PROGRAMS["exception_in_else_not_caught_by_same_try"] = """
def main():
    try:
        try:
            pass
        except ValueError:
            print("not here")
        else:
            raise ValueError("from else")
    except ValueError as e:
        print("outer", e)
"""

PROGRAMS["builtin_errors_from_operations"] = """
def main():
    cases = [lambda: 1 / 0, lambda: [][1], lambda: {}["k"], lambda: int("x"), lambda: "a" + 1,
             lambda: None.attr, lambda: undefined_name]
    for c in cases:
        try:
            c()
        except Exception as e:
            print(type(e).__name__)
"""

PROGRAMS["error_messages_of_common_failures"] = """
def main():
    for c in (lambda: 1 / 0, lambda: [1][5], lambda: {}["k"], lambda: int("x")):
        try:
            c()
        except Exception as e:
            print(type(e).__name__, e)
"""

PROGRAMS["raise_class_not_instance"] = """
def main():
    try:
        raise ValueError
    except ValueError as e:
        print(type(e).__name__, e.args)
"""

PROGRAMS["exception_in_loop_continue"] = """
def main():
    out = []
    for v in ["1", "x", "3", "", "5"]:
        try:
            out.append(int(v))
        except ValueError:
            out.append(None)
            continue
    print(out)
"""

PROGRAMS["return_in_except"] = """
def parse(s):
    try:
        return int(s)
    except ValueError:
        return -1
    finally:
        print("parsed", repr(s))

def main():
    print(parse("4"), parse("no"))
"""

PROGRAMS["assert_error_message"] = """
def main():
    try:
        assert 2 + 2 == 5, f"math is {2 + 2}"
    except AssertionError as e:
        print(e.args)
"""

PROGRAMS["stop_iteration_from_next"] = """
def main():
    it = iter([])
    try:
        next(it)
    except StopIteration as e:
        print("empty", e.args)
"""

PROGRAMS["exception_caught_by_tuple_of_custom"] = """
class A(Exception):
    pass

class B(Exception):
    pass

def main():
    for cls in (A, B):
        try:
            raise cls("x")
        except (A, B) as e:
            print(type(e).__name__)
"""

PROGRAMS["exception_with_traceback_free_str_formatting"] = """
class Detailed(Exception):
    def __init__(self, n):
        super().__init__(n)
        self.n = n
    def __str__(self):
        return f"detail {self.n}"

def main():
    try:
        raise Detailed(4)
    except Detailed as e:
        print(str(e), e.n, e.args)
"""

PROGRAMS["except_star_free_multi_handlers"] = """
def classify(e):
    try:
        raise e
    except KeyError:
        return "key"
    except LookupError:
        return "lookup"
    except Exception:
        return "other"

def main():
    print([classify(e) for e in (KeyError(), IndexError(), ValueError())])
"""

PROGRAMS["exception_equality_identity"] = """
def main():
    e = ValueError("x")
    try:
        raise e
    except ValueError as caught:
        print(caught is e)
"""
