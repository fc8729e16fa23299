"""Schedules (how to compute) and lowering them to loop IR."""

from .lower import lower
from .relations import Fuse, Split
from .schedule import Schedule, Stage, create_schedule
