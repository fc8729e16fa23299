"""Tuning a model's tasks together: each batch of trials goes to the task whose tuning is
expected to cut the model's latency most.

The model's estimated latency is ``sum(task.weight * best_cost(task))``. After a warm-up
round that gives every task one batch, the scheduler picks the task with the most
negative estimated gradient of that sum per batch, as Ansor's gradient-based task
scheduler does (Zheng et al., OSDI 2020, section 6):

- the *backward* gradient, the task's recent improvement per batch over the last
  ``backward_window`` batches;
- the *forward* gradient, an optimistic guess of the next batch's gain: the larger of
  the ``1/t`` decay ``cost/t`` (``t``: the task's batches so far) and the gain of
  running at ``1/beta`` of the best FLOP throughput that another task of the same
  template has reached;

mixed as ``weight * (alpha * backward + (1 - alpha) * forward)``. A task stops getting
trials when its space is exhausted or after ``early_stopping`` trials without an
improvement; tuning ends when the budget is spent or no task can go on.

On a cluster (a runner with ``measure_slots``, such as ``DaskRunner``) several batches of
different tasks are in flight at once, enough to keep every measuring node busy: each slot
that frees up goes to the task with the best gradient among those not already in flight,
so trials still go where the model gains most.
"""

from __future__ import annotations

import contextlib
import math
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from .cost_model import SharedCostModel
from .measure import measure_option as _default_option
from .tuner import EvolutionTuner


class TaskScheduler:
    """Tunes several tasks (a model's, from ``extract_tasks``) into one log.

    Parameters
    ----------
    tasks : list of Task
        The tasks; each ``task.weight`` is how often it runs in the model.
    tuner : callable, optional
        ``tuner(task) -> Tuner``. Default: an ``EvolutionTuner(task, seed=seed)`` per
        task, all sharing one cost model (``cost_model``, a ``SharedCostModel``) trained
        on every task's measurements as they arrive.
    seed : int, optional
        Seed of the default tuners and their cost model.
    batch_size : int, optional
        Trials per batch given to one task (default 8).
    alpha, beta : float, optional
        Weight of the backward gradient against the forward one; the forward one
        assumes a task can reach ``1/beta`` of the best throughput of its template.
    backward_window : int, optional
        Batches over which the backward gradient is taken.

    Examples
    --------
    >>> tasks = autotune.extract_tasks(mod, params, target="llvm")        # doctest: +SKIP
    >>> TaskScheduler(tasks).tune(200, autotune.measure_option(),          # doctest: +SKIP
    ...                           callbacks=[autotune.log_to_file("model.json")])
    """

    def __init__(self, tasks, tuner=None, seed: int | None = None, batch_size: int = 8,
                 alpha: float = 0.2, beta: float = 2.0, backward_window: int = 3):
        self.tasks = list(tasks)
        #: The cost model the default tuners share (None with a ``tuner`` of one's own).
        self.cost_model = None
        if tuner is None:
            self.cost_model = SharedCostModel(seed=seed or 0)

            def tuner(task):
                return EvolutionTuner(task, model=self.cost_model, seed=seed)

        self.tuners = [tuner(task) for task in self.tasks]
        self.batch_size = max(1, int(batch_size))
        self.alpha, self.beta = alpha, beta
        self.backward_window = backward_window
        # Best cost (seconds) of each task after each of its batches, newest last.
        self.cost_history: list[list[float]] = [[] for _ in self.tasks]
        # (trials over all tasks, estimated_latency()) after each batch from the first at
        # which every task has a measured cost: the model's tuning curve.
        self.curve: list[tuple[int, float]] = []
        # The same points split by task: (trials over all tasks, weight x best cost of
        # each task), what ``tecomp tune MODEL --plot`` stacks.
        self.task_curve: list[tuple[int, tuple[float, ...]]] = []
        self.n_resumed = 0
        self.stop_reason = ""

    # -- the model's view ---------------------------------------------------------------------

    def best_cost(self, i: int) -> float:
        """Best measured cost of task ``i`` in seconds (inf before a successful trial)."""
        result = self.tuners[i].best_result
        return result.cost if result is not None else math.inf

    def estimated_latency(self) -> float:
        """``sum(weight * best cost)`` in seconds over the tasks measured successfully:
        the part of the model's latency that its tunable kernels take."""
        costs = [(t.weight, self.best_cost(i)) for i, t in enumerate(self.tasks)]
        return sum(w * c for w, c in costs if math.isfinite(c))

    @property
    def n_done(self) -> int:
        """Trials of all tasks, resumed ones included."""
        return sum(t.n_done for t in self.tuners)

    @property
    def n_trials(self) -> int:
        """Trials of all tasks in their tuners' histories (``Tuner.n_trials``)."""
        return sum(t.n_trials for t in self.tuners)

    @property
    def n_invalid(self) -> int:
        """Trials of all tasks whose program failed (``Tuner.n_invalid``)."""
        return sum(t.n_invalid for t in self.tuners)

    @property
    def invalid_rate(self) -> float:
        """``n_invalid`` over ``n_trials`` (0 before any)."""
        return self.n_invalid / self.n_trials if self.n_trials else 0.0

    @property
    def n_disturbed(self) -> int:
        """Measurements of all tasks the machine disturbed (``Tuner.n_disturbed``)."""
        return sum(t.n_disturbed for t in self.tuners)

    # -- choosing the next task ---------------------------------------------------------------

    def gradient(self, i: int) -> float:
        """Estimated change of the model's latency (seconds) if task ``i`` gets its next
        batch (negative: a gain; see the module docstring)."""
        history = self.cost_history[i]
        cost = self.best_cost(i)
        if not history or not math.isfinite(cost):
            return 0.0
        window = self.backward_window
        backward = ((history[-1] - history[-1 - window]) / window
                    if len(history) > window and math.isfinite(history[-1 - window]) else 0.0)
        task = self.tasks[i]
        similar = [self.tasks[j].flop / self.best_cost(j) for j in range(len(self.tasks))
                   if self.tasks[j].name == task.name and math.isfinite(self.best_cost(j))]
        reach = (self.beta * task.flop / max(similar) if len(similar) > 1 and max(similar) > 0
                 else math.inf)
        forward = min(cost - cost / len(history), reach) - cost
        return task.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def _next_task(self, alive: list[bool]) -> int:
        """The task that gets the next batch: one not yet given a batch in this session
        (the warm-up round), else the most negative gradient (fewest batches on ties)."""
        for i, ok in enumerate(alive):
            if ok and not self.cost_history[i]:
                return i
        candidates = [i for i, ok in enumerate(alive) if ok]
        return min(candidates, key=lambda i: (self.gradient(i), len(self.cost_history[i])))

    # -- the loop -----------------------------------------------------------------------------

    def tune(self, n_trial: int, measure_option: dict | None = None, callbacks=(),
             resume_from=None, early_stopping: int | None = None,
             remeasure_top: int = 3, remeasure_rounds: int = 5, in_flight: int | None = None):
        """Measure up to ``n_trial`` configs over all tasks, into one set of callbacks.

        Parameters
        ----------
        n_trial : int
            The budget over all tasks; trials resumed from ``resume_from`` count in it.
        measure_option : dict, optional
            ``measure_option(builder, runner)``, shared by all tasks.
        callbacks : sequence, optional
            Called as ``cb(scheduler, inputs, results)`` after each batch of any task
            and after each task's final re-measurement; ``log_to_file(path)`` writes the
            model's one log. One with a ``start(scheduler)`` method has it called once
            before the first measurement.
        resume_from : str or Records, optional
            An earlier log of these tasks: its trials count per task and are never
            measured again (each tuner also learns from them).
        early_stopping : int, optional
            A task gets no more trials after this many without an improvement.
        remeasure_top, remeasure_rounds : int, optional
            Each task measured in this session ends as ``Tuner.tune`` does: its best
            ``remeasure_top`` candidates re-measured interleaved decide its winner.
        in_flight : int, optional
            Batches (of different tasks) measured at once. Default: 1 for a runner of
            one machine; for a runner with ``measure_slots`` (``DaskRunner``) enough to
            keep every measuring node busy. With more than one, batches run in threads;
            the callbacks are still called one at a time.

        Returns
        -------
        TaskScheduler
            ``self``; ``tuners[i].best_config`` is task ``i``'s winner. Ctrl-C stops
            the loop (``KeyboardInterrupt`` propagates); records written so far stay.
        """
        option = measure_option or _default_option()
        builder, runner = option["builder"], option["runner"]
        if resume_from is not None:
            for tuner in self.tuners:
                with contextlib.suppress(FileNotFoundError):
                    tuner.load_history(resume_from)
        self.n_resumed = sum(t.n_resumed for t in self.tuners)
        for i, tuner in enumerate(self.tuners):
            if tuner.n_resumed:
                # Resumed batches count as tuned (no warm-up batch) without a slope.
                self.cost_history[i] = [self.best_cost(i)] * max(
                    1, tuner.n_resumed // self.batch_size)
        self.stop_reason = "budget"
        lock = threading.Lock()
        stopped = threading.Event()

        def relay(tuner, inputs, results):
            # Batches of several tasks may end at once: one callback call at a time, and
            # none after the loop was stopped (their trials belong to no session).
            with lock:
                if not stopped.is_set():
                    for cb in callbacks:
                        cb(self, inputs, results)

        try:
            for cb in callbacks:
                if hasattr(cb, "start"):
                    cb.start(self)
            for tuner in self.tuners:
                tuner.start(builder, remeasure_top=remeasure_top)
            n_trial = int(n_trial)
            width = self._in_flight(in_flight, runner)
            if width == 1:
                self._tune_serial(n_trial, builder, runner, relay, early_stopping)
                for tuner in self.tuners:
                    tuner.finish(builder, runner, (relay,), remeasure_top, remeasure_rounds)
            else:
                with ThreadPoolExecutor(width, thread_name_prefix="tecomp-task") as pool:
                    try:
                        self._tune_in_flight(pool, width, n_trial, builder, runner, relay,
                                             early_stopping)
                        ends = [pool.submit(t.finish, builder, runner, (relay,), remeasure_top,
                                            remeasure_rounds) for t in self.tuners]
                        for f in ends:
                            f.result()
                    except BaseException:
                        stopped.set()
                        pool.shutdown(wait=False, cancel_futures=True)
                        raise
        finally:
            builder.close()
            runner.close()
        return self

    def _in_flight(self, in_flight, runner) -> int:
        """Batches measured at once: ``in_flight``, else enough to keep every measuring
        node of the runner busy (two batches' worth of trials per node, so one builds
        while the other is timed), one per task at most; 1 for a runner of one machine."""
        if in_flight is None:
            slots = getattr(runner, "measure_slots", None)
            if slots is None:
                return 1
            nodes = slots([t.target for t in self.tasks])
            in_flight = math.ceil(2 * nodes / self.batch_size)
        return max(1, min(int(in_flight), len(self.tasks)))

    def _after_batch(self, i: int) -> None:
        self.cost_history[i].append(self.best_cost(i))
        if all(math.isfinite(self.best_cost(j)) for j in range(len(self.tasks))):
            self.curve.append((self.n_done, self.estimated_latency()))
            self.task_curve.append((self.n_done, tuple(
                t.weight * self.best_cost(j) for j, t in enumerate(self.tasks))))

    def _tune_serial(self, n_trial, builder, runner, relay, early_stopping) -> None:
        """One batch at a time (a runner of one machine)."""
        alive = [True] * len(self.tuners)
        while self.n_done < n_trial:
            if not any(alive):
                self.stop_reason = "every task exhausted its space or stopped improving"
                break
            i = self._next_task(alive)
            n = min(self.batch_size, n_trial - self.n_done)
            alive[i] = self.tuners[i].measure_batch(n, builder, runner, (relay,),
                                                    early_stopping)
            self._after_batch(i)

    def _tune_in_flight(self, pool, width, n_trial, builder, runner, relay,
                        early_stopping) -> None:
        """Up to ``width`` batches of different tasks measured at once (a cluster): each
        free slot goes to the task the gradient picks among those not in flight, and
        the trials of batches in flight are reserved from the budget."""
        alive = [True] * len(self.tuners)
        running: dict = {}  # future -> (task index, trials)
        while True:
            reserved = sum(n for _, n in running.values())
            busy = {i for i, _ in running.values()}
            while len(running) < width and self.n_done + reserved < n_trial:
                free = [ok and i not in busy for i, ok in enumerate(alive)]
                if not any(free):
                    break
                i = self._next_task(free)
                n = min(self.batch_size, n_trial - self.n_done - reserved)
                fut = pool.submit(self.tuners[i].measure_batch, n, builder, runner, (relay,),
                                  early_stopping)
                running[fut] = (i, n)
                reserved += n
                busy.add(i)
            if not running:
                if self.n_done < n_trial:
                    self.stop_reason = "every task exhausted its space or stopped improving"
                return
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                i, _n = running.pop(fut)
                alive[i] = fut.result()
                self._after_batch(i)
