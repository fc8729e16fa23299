"""The autotuner, in AutoTVM's vocabulary.

Write a template with ``@template(name)`` and ``get_config()`` knobs, make a task with
``create_task``, tune it with a tuner (``XGBTuner``, ``GATuner``, ``RandomTuner``,
``GridSearchTuner``) and ``measure_option(LocalBuilder(), LocalRunner())``, log with
``log_to_file``, and build with the best config under ``apply_history_best``.

The autotuner knows no operator by itself: the built-in templates (``matmul``, ``dense``,
``conv2d``, ...) are registered by the operator library, ``tecomp.topi``, which
``from tecomp import autotune`` loads along with this package.
"""

from .callback import log_to_file, progress_bar
from .measure import (
    BuildResult,
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    measure_option,
)
from .records import (
    ApplyHistoryBest,
    Record,
    apply_history_best,
    load_from_file,
    pick_best,
    use_shipped_logs,
)
from .space import (
    ConfigEntity,
    ConfigError,
    ConfigSpace,
    FallbackConfigEntity,
)
from .task import TEMPLATES, Task, TemplateError, create_task, get_config, template
from .tuner import GATuner, GridSearchTuner, RandomTuner, Tuner, XGBTuner

__all__ = [
    "TEMPLATES",
    "ApplyHistoryBest",
    "BuildResult",
    "ConfigEntity",
    "ConfigError",
    "ConfigSpace",
    "FallbackConfigEntity",
    "GATuner",
    "GridSearchTuner",
    "LocalBuilder",
    "LocalRunner",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "RandomTuner",
    "Record",
    "Task",
    "TemplateError",
    "Tuner",
    "XGBTuner",
    "apply_history_best",
    "create_task",
    "get_config",
    "load_from_file",
    "log_to_file",
    "measure_option",
    "pick_best",
    "progress_bar",
    "template",
    "use_shipped_logs",
]
