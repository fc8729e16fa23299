"""Passes over the loop IR, each a function ``PrimFunc -> PrimFunc``, run in order by
:mod:`.pipeline` (``tecomp.lower`` runs it):

- :func:`simplify`: simplify every expression with loop bounds, fold decided branches,
  drop extent-1 loops (:mod:`.simplify`);
- :func:`partition_loops`: cut loops where the conditions in their bodies are decided,
  so that simplifying removes the conditions from the middle part (:mod:`.partition`);
- :func:`legalize`: decide which vectorize/unroll/parallel annotations the target's code
  generator can honour, and make the others serial loops with a hint (:mod:`.legalize`).
"""

from .legalize import legalize
from .partition import partition_loops
from .simplify import simplify
