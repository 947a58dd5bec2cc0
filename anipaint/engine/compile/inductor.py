"""AOTInductor compiles of the fast backends, with Inductor's stride question answered without sympy where the
answer is certain.

Inductor's C++ code generator asks, for every index expression of every loop and every loop variable, for the
stride: ``index(v + 1) - index(v)``, put through ``sympy.simplify``. It only reads the answer as a class: zero,
one, another number, an expression in sizes only, or one that still depends on a loop variable (then the loop is
not contiguous there and is never tiled or transposed by it). Reflection padding writes indices as nested
``Abs`` and ``Where`` expressions, and simplifying each such difference takes 0.3-0.6 s and gives back an
expression that still depends on the variable: on v3-cute 354 strides took 9.8 s of a 41 s compile.

:func:`stride_at` keeps Inductor's answer wherever the class could differ: only a difference with ``Abs`` in it
that takes two different values at two values of the variable (evaluated exactly, in integers) is returned
unsimplified, since no simplification can make such an expression free of the variable. Every other difference
is simplified as before, so the generated C++ is byte for byte what Inductor alone writes, only sooner.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

import sympy
import torch

_installed = False
_install_lock = threading.Lock()
# Values tried for the loop variable, and bases for the other symbols (sizes and other loop variables, all
# positive or non-negative integers in Inductor): any two values that differ settle the question.
_VARIABLE_VALUES = (0, 1, 2, 5, 9, 17)
_OTHER_BASES = (3, 7, 12)


def varies_with(difference: sympy.Expr, var: sympy.Symbol) -> bool:
    """Whether ``difference`` takes two different integer values as ``var`` changes, the other symbols fixed.
    False when unsure (an expression that does not evaluate to a number)."""
    others = sorted(difference.free_symbols - {var}, key=str)
    for base in _OTHER_BASES:
        point = {symbol: base + i for i, symbol in enumerate(others)}
        seen: set[int] = set()
        for value in _VARIABLE_VALUES:
            try:
                number = difference.xreplace({**point, var: value})
            except (TypeError, ValueError, ZeroDivisionError):
                return False
            if not (number.is_Number and number.is_integer):
                return False
            seen.add(int(number))
            if len(seen) > 1:
                return True
    return False


@functools.lru_cache
def stride_at(index: sympy.Expr, var: sympy.Symbol) -> sympy.Expr:
    """Inductor's ``sizevars.stride_at``, with the certain ``Abs`` cases answered without ``sympy.simplify``."""
    from torch._inductor.utils import sympy_subs

    if not index.has(var):
        return sympy.S.Zero
    difference = sympy_subs(index, {var: var + 1}) - index
    if difference.has(sympy.Abs) and varies_with(difference, var):
        return difference
    return sympy.simplify(difference)


def install() -> None:
    """Answer Inductor's strides with :func:`stride_at` in this process (idempotent)."""
    global _installed
    with _install_lock:
        if not _installed:
            from torch._inductor import sizevars

            sizevars.stride_at = stride_at
            _installed = True


def compile_package(program: Any, out: Path, configs: dict[str, Any] | None = None) -> None:
    """``torch._inductor.aoti_compile_and_package`` of an exported program into ``out``, with grad off."""
    install()
    with torch.no_grad():
        torch._inductor.aoti_compile_and_package(program, package_path=str(out), inductor_configs=configs)
