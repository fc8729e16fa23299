"""Passes over the loop IR, each a function ``PrimFunc -> PrimFunc``.

- :func:`simplify`: simplify every expression with loop bounds, fold decided branches,
  drop extent-1 loops (:mod:`.simplify`);
- :func:`partition_loops`: cut loops where the conditions in their bodies are decided,
  so that simplifying removes the conditions from the middle part (:mod:`.partition`).
"""

from .partition import partition_loops
from .simplify import simplify
