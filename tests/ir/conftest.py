"""Makes the helpers of ``tests/ir`` (reference evaluator, strategies) importable from its
sub-folders."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
