"""The compile's quick strides (anipaint.engine.compile.inductor) give Inductor's answer: the same class of stride
as ``sympy.simplify`` of the same difference (what Inductor computes), for the index expressions reflection
padding, upsampling and plain contiguous loops write."""

from __future__ import annotations

import sympy
from torch._inductor.utils import sympy_index_symbol, sympy_subs
from torch.utils._sympy.functions import FloorDiv, ModularIndexing, Where
from torch.utils._sympy.symbol import SymT, make_symbol, symbol_is_type

from anipaint.engine.compile.inductor import stride_at, varies_with

d0, d1, d2 = (sympy_index_symbol(f"d{i}") for i in range(3))
s11, s52 = (make_symbol(SymT.SIZE, i, integer=True, positive=True) for i in (11, 52))


def _reflect(var: sympy.Symbol, size: sympy.Expr, shift: int) -> sympy.Expr:
    # Inductor's reflection-pad index, as it stands in v3's compiled kernels.
    folded = sympy.Abs(-size + sympy.Abs(var - shift) + 1)
    return Where(size - folded - 1 < 0, 2 * size - folded - 1, size - folded - 1)


INDICES = [
    d2 + 128 * s11 * _reflect(d0, 4 * s52, 1) + 32 * _reflect(d1, 4 * s11, 1),  # a padded 3x3 conv's input
    d2 + 48 * s11 * _reflect(d0, 16 * s52, 3) + 3 * _reflect(d1, 16 * s11, 3),  # the 7x7 first layer's
    d2 + 64 * d1 + 64 * 256 * d0,  # contiguous channels-last
    d2 + 3 * FloorDiv(d1, 2) + 3 * 256 * FloorDiv(d0, 2),  # nearest upsampling
    ModularIndexing(d1, 1, 16) + 16 * d0 + 32 * sympy.Abs(d2 - 4),
    d1 + s11 * sympy.Abs(d0 - 3),  # Abs in another variable than the stride's
    16 * d0 + sympy.Abs(d1 - 4) * sympy.sign(d1 - 4),  # Abs in d1, but a stride of 1 that only simplify shows
]


def _stride_class(stride: sympy.Expr, var: sympy.Symbol) -> tuple:
    """What Inductor reads of a stride: its value if a number, whether it depends on the loop variable, and whether
    it is made of sizes only."""
    sizes_only = all(symbol_is_type(s, SymT.SIZE) for s in stride.free_symbols)
    return (stride if stride.is_number else None, stride.has(var), sizes_only)


def test_quick_strides_fall_in_the_same_class_as_simplified_ones() -> None:
    checked = quick = 0
    for index in INDICES:
        for var in (d0, d1, d2):
            ours = stride_at(index, var)
            reference = sympy.simplify(sympy_subs(index, {var: var + 1}) - index) if index.has(var) else sympy.S.Zero
            assert _stride_class(ours, var) == _stride_class(reference, var), (index, var, ours, reference)
            checked += 1
            quick += ours != reference
    assert checked == 21 and quick >= 3  # the padded indices' strides in d0 and d1 were not simplified


def test_varies_with_is_true_only_where_the_value_changes() -> None:
    assert varies_with(sympy.Abs(d1 - 4) - sympy.Abs(d1 - 3), d1)
    assert not varies_with(sympy.Abs(d0 - 4) + 0 * d1, d1)  # depends on another variable only
    assert not varies_with(sympy.Abs(d1 + 1) - sympy.Abs(d1), d1)  # 1 everywhere (d1 >= 0)
    assert not varies_with(sympy.Abs(d1 - 4) - sympy.Abs(d1 - 4) + sympy.Symbol("x") / 2, d1)  # not an integer
