"""The tuning logs shipped with tecomp still apply to the operators as they are now."""

import pytest

from tecomp import autotune
from tecomp.autotune.records import load_from_file, shipped_log_dir


def _tuned_on(record) -> str:
    """The CPU a record was measured on, as a target: its key's ``-mcpu`` (a record of
    plain "llvm" meant that machine's CPU, whose vector width shapes some computes)."""
    mcpu = next((p.split("=", 1)[1] for p in record.target_key.split()
                 if p.startswith("-mcpu=")), None)
    return f"llvm -mcpu={mcpu}" if mcpu else record.target


def _shipped_workloads():
    log_dir = shipped_log_dir()
    files = sorted(log_dir.glob("*.json")) if log_dir else []
    return sorted({(r.name, r.args, r.workload_hash, _tuned_on(r))
                   for f in files for r in load_from_file(f)}, key=repr)


def test_logs_are_shipped():
    assert _shipped_workloads(), "no shipped tuning logs found"


@pytest.mark.parametrize("name, args, workload_hash, target", _shipped_workloads(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_shipped_record_workloads_match_the_compute_hash(name, args, workload_hash, target):
    task = autotune.create_task(name, args, target)
    assert task.workload_hash == workload_hash
