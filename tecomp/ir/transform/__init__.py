"""Passes over loop IR: functions ``PrimFunc -> PrimFunc``, run in order by ``pipeline``."""
