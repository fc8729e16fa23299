"""Integer arithmetic analysis: simplification, constant bounds, proofs, symbolic
intervals and linear forms, split as TVM splits its ``arith`` namespace.

Values and pure functions on them:

- :mod:`.interval`: constant integer intervals, their arithmetic and the comparisons they
  decide;
- :mod:`.const_fold`: operators applied to constants (values from :mod:`tecomp.ir.semantics`);
- :mod:`.sum_expr`: canonical sums of products and their exact algebra.

The :class:`Analyzer` (:mod:`.analyzer`, with one-shot functions over it) and its parts,
each a class with its own state that reaches its siblings through the analyzer:

- :mod:`.atoms`: interned atoms and the term order;
- :mod:`.const_int_bound`: constant bounds of the variables in scope and of expressions;
- :mod:`.canonical`: the canonical sum-of-products form of index expressions;
- :mod:`.rewrite_simplify`: rules for the nodes that are not sums (floats, comparisons,
  logic, select, cast, let);
- :mod:`.int_set`: symbolic intervals of expressions while variables vary.

And on top of the analyzer, :mod:`.sizes`: tensor dimensions, whose symbols are sizes
(never negative).

All integer reasoning here is over mathematical integers: index arithmetic is assumed
not to overflow its dtype (as in TVM and Halide). ``//`` and ``%`` are floor division and
floor modulo, as in Python.
"""

from .analyzer import Analyzer, const_int_bound, eval_interval, linear_coeff, prove, simplify
from .canonical import CANONICAL_DTYPES
from .interval import (
    UNBOUNDED,
    Bounds,
    Interval,
    dtype_interval,
    iv_add,
    iv_floordiv,
    iv_floormod,
    iv_intersect,
    iv_max,
    iv_min,
    iv_mul,
    iv_scale,
    iv_union,
)
from .sizes import (
    prefer_unclamped,
    product_factors,
    remove_factors,
    simplify_size,
    size_bounds,
    size_factors,
)
