"""`preemptd explain` of a name: the application or task it names in each partition, every
decision about it, and the words its model's users know these by (Kueue's workloads, pods and
ClusterQueues; Volcano's jobs, tasks and queues; YuniKorn's applications, tasks and queues)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from preemptd.events import (
    Admitted,
    Allocated,
    AppSubmitted,
    Blocked,
    ConfigApplied,
    Decision,
    Evicted,
    Preempted,
    QuotaEnforced,
    TaskBound,
    TaskSubmitted,
    Unreserved,
    closest,
    decode_decision,
    decode_log_event,
)
from preemptd.projections import Words, refuse_decision
from preemptd.scheduling import DEFAULT_MODEL, listing, model_named

from .render import count, printable

if TYPE_CHECKING:
    from ..log.archive import Searched
    from ..records import LogRow

__all__ = ["Story", "Terms", "closest_name", "model_at", "models_of", "stories", "terms_of"]

#: At most this many decisions are shown per application or task (the newest), and at most
#: this many of its submissions are read for the names of its tasks.
SHOWN = 200


@dataclass(frozen=True)
class Terms:
    """A model's words for applications, tasks and queues (`Words`: Kueue's workloads and
    ClusterQueues, Volcano's jobs), and whether its decisions are about an application as a
    whole: a model that makes decisions of its own (Kueue admits and evicts workloads, not
    pods) tells a task's story as its application's."""

    words: Words = Words()
    whole: bool = False


@functools.cache
def terms_of(model: str) -> Terms:
    found = model_named(model)
    return Terms(found.parse_config({}, "default").words, whole=found.fold_decision is not refuse_decision)


#: (log position, partition, model) of each `config.applied`, oldest first.
Models = list[tuple[int, str, str]]


def models_of(configs: list[LogRow]) -> Models:
    """Which model each partition ran from which log position on."""
    out: Models = []
    for row in configs:
        event = decode_log_event(row.payload)
        assert isinstance(event, ConfigApplied)
        out.append((row.seq, event.partition, DEFAULT_MODEL if event.model is msgspec.UNSET else event.model))
    return out


def model_at(models: Models, partition: str, seq: int) -> str:
    """The model `partition` ran at log position `seq`: its last configuration before it."""
    return next((model for at, where, model in reversed(models) if where == partition and at < seq), DEFAULT_MODEL)


@dataclass(frozen=True)
class Story:
    """What a name stands for in one partition (an application, its tasks as far as the log
    names them, and the task named, if a task was), in its model's terms, and the decisions
    about it, oldest first; `cut` when older ones were left out."""

    partition: str
    app: str
    tasks: tuple[str, ...]
    task: str | None
    terms: Terms
    rows: list[LogRow]
    cut: bool

    def heading(self) -> str:
        """`workload w-1 (pods w-1-0, w-1-1)`, `job build, task build-0`: what the name matched."""
        words = self.terms.words
        app = f"{words.application} {printable(self.app)}"
        if self.task is not None and not self.terms.whole:
            matched = f"{app}, {words.task} {printable(self.task)}"
        else:
            matched = f"{app} ({words.task}s {listing([printable(task) for task in self.tasks])})" if self.tasks else f"{app} (no {words.task}s)"
        older = " (the newest; older ones left out)" if self.cut else ""
        return f"{matched} in partition {printable(self.partition)}: {count(len(self.rows), 'decision')}{older}"


async def stories(store: Searched, name: str, models: Models) -> list[Story]:
    """Every application `name` names or a task of which it names, each with the decisions
    about it: under Kueue a workload's from the workload or any of its pods; elsewhere an
    application's from its name, a task's from the task's."""
    found = []
    for partition, app, task, seq in _named(name, await store.submissions_naming(name, limit=SHOWN)):
        terms = terms_of(model_at(models, partition, seq))
        tasks = _tasks_of(partition, app, await store.submissions_naming(app, limit=SHOWN)) if task is None or terms.whole else (task,)
        rows = await store.decisions_about(app, *tasks, limit=SHOWN)
        about = [row for row in rows if _concerns(decode_decision(row.payload), partition, app, tasks, None if terms.whole else task)]
        found.append(Story(partition, app, tasks, task, terms, about, cut=len(rows) == SHOWN))
    return found


def _named(name: str, rows: list[LogRow]) -> list[tuple[str, str, str | None, int]]:
    """(partition, application, task named or None, log position) of each application `name`
    is, or has a task called `name`, in the order the log first names them. An application
    named like one of its tasks is the application."""
    first: dict[tuple[str, str], int] = {}
    for row in rows:
        event = decode_log_event(row.payload)
        if isinstance(event, AppSubmitted | TaskSubmitted | TaskBound) and event.app and name in (event.app, getattr(event, "task", None)):
            first.setdefault((event.partition, event.app), row.seq)
    return [(partition, app, None if app == name else name, seq) for (partition, app), seq in first.items()]


def _tasks_of(partition: str, app: str, rows: list[LogRow]) -> tuple[str, ...]:
    """The tasks of `app` in `partition` the rows name, in the order they came."""
    events = (decode_log_event(row.payload) for row in rows)
    return tuple(dict.fromkeys(e.task for e in events if isinstance(e, TaskSubmitted | TaskBound) and e.partition == partition and e.app == app))


def _concerns(decision: Decision, partition: str, app: str, tasks: tuple[str, ...], task: str | None) -> bool:
    """Whether `decision` is about the application (`task` None) or about the task `task`
    (its own decisions and those about its application as a whole)."""
    if decision.partition != partition:
        return False
    if task is None:
        return _about_app(decision, app, tasks)
    return _about_task(decision, task) or isinstance(decision, Admitted | Evicted) and _about_app(decision, app, tasks)


def _about_app(decision: Decision, app: str, tasks: tuple[str, ...]) -> bool:
    """A decision for the application or one of its tasks, or taking one of them as a victim."""
    match decision:
        case Allocated() | Blocked() | Admitted():
            return decision.app == app
        case Preempted():
            return decision.app == app or any(victim.app == app for victim in decision.victims)
        case QuotaEnforced():
            return any(victim.app == app for victim in decision.victims)
        case Evicted():
            return app in (decision.app, decision.preemptor)
        case Unreserved():
            return decision.task in tasks
    return False


def _about_task(decision: Decision, task: str) -> bool:
    """A decision for the task, or taking it as a victim."""
    match decision:
        case Allocated() | Blocked() | Unreserved():
            return decision.task == task
        case Preempted():
            return decision.preemptor == task or any(victim.task == task for victim in decision.victims)
        case QuotaEnforced():
            return any(victim.task == task for victim in decision.victims)
    return False


async def closest_name(store: Searched, name: str) -> str | None:
    """The application or task of the newest submissions `name` is probably a misspelling of."""
    known: dict[str, None] = {}
    for row in await store.latest_submissions(500):
        event = decode_log_event(row.payload)
        if isinstance(event, TaskSubmitted | TaskBound):
            known.update(dict.fromkeys([event.task, event.app or event.task]))
        elif isinstance(event, AppSubmitted):
            known[event.app] = None
    return closest(name, known)
