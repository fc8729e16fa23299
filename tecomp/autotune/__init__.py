"""The autotuner, in AutoTVM's vocabulary.

Write a template with ``@template(name)`` and ``get_config()`` knobs, make a task with
``create_task``, tune it with a tuner (``EvolutionTuner``, ``XGBTuner``, ``GATuner``,
``RandomTuner``, ``GridSearchTuner``) and ``measure_option(LocalBuilder(),
LocalRunner())``, log with ``log_to_file``, and build with the best config under
``apply_history_best``.

On a Dask cluster, ``measure_option(builder=DaskBuilder(client),
runner=DaskRunner(client))`` builds on any worker and measures on the workers that
advertise the task's target (``worker_resources``; see ``dask_measure``).

For a model: ``extract_tasks(mod, params, target)`` lists its tasks with their weights and
``TaskScheduler(tasks).tune(n_trial, option, callbacks=[model_progress_bar(n_trial),
log_to_file(path)])`` tunes them all into one log.

The autotuner knows no operator by itself: the built-in templates (``matmul``, ``dense``,
``conv2d``, ...) are registered by the operator library, ``tecomp.topi``. Importing this
package imports it (``tecomp.BUILTIN_TEMPLATES``, by name: no module of the autotuner
imports the operator library), so ``import tecomp.autotune`` and ``from tecomp import
autotune`` find the same templates.
"""

import importlib

from .. import BUILTIN_TEMPLATES
from .callback import log_to_file, model_progress_bar, progress_bar
from .extract import extract_tasks, register_task_extractor
from .dask_measure import ClusterError, DaskBuilder, DaskRunner, worker_resources
from .measure import BuildResult, LocalBuilder, LocalRunner, OffHostRunner, measure_option
from .result import MeasureErrorNo, MeasureInput, MeasureResult
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
from .task import (
    TEMPLATES,
    Task,
    TemplateError,
    create_task,
    get_config,
    has_tuned_record,
    template,
    tuned_cost,
)
from .task_scheduler import TaskScheduler
from .cost_model import SharedCostModel
from .tuner import EvolutionTuner, GATuner, GridSearchTuner, RandomTuner, Tuner, XGBTuner

__all__ = [
    "TEMPLATES",
    "ApplyHistoryBest",
    "BuildResult",
    "ClusterError",
    "ConfigEntity",
    "ConfigError",
    "ConfigSpace",
    "DaskBuilder",
    "DaskRunner",
    "EvolutionTuner",
    "FallbackConfigEntity",
    "GATuner",
    "GridSearchTuner",
    "LocalBuilder",
    "LocalRunner",
    "OffHostRunner",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "RandomTuner",
    "Record",
    "SharedCostModel",
    "Task",
    "TaskScheduler",
    "TemplateError",
    "Tuner",
    "XGBTuner",
    "apply_history_best",
    "create_task",
    "extract_tasks",
    "register_task_extractor",
    "get_config",
    "has_tuned_record",
    "tuned_cost",
    "load_from_file",
    "log_to_file",
    "model_progress_bar",
    "measure_option",
    "pick_best",
    "progress_bar",
    "template",
    "use_shipped_logs",
    "worker_resources",
]


def _register_builtin_templates() -> None:
    # The packages named register their templates as they import. One importing this
    # package as it imports itself (tecomp.topi first) is returned as far as it got and
    # registers the rest when it carries on.
    for package in BUILTIN_TEMPLATES:
        importlib.import_module(package)


_register_builtin_templates()
