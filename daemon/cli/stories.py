"""`preemptd explain` of a name: the application or task it names in each partition, every
decision about it, and the words its model's users know these by (Kueue's workloads, pods and
ClusterQueues; Volcano's jobs, tasks and queues; YuniKorn's applications, tasks and queues)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
from preemptd.projections import PartitionState, Rejected, Words
from preemptd.scheduling import DEFAULT_MODEL, configured_alone, counted, listing, model_named

from .render import printable

if TYPE_CHECKING:
    from ..log.history import History
    from ..records import LogRow

__all__ = ["QueueStory", "Story", "Terms", "closest_name", "model_at", "models_of", "queue_stories", "stories", "terms_of"]

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
    return Terms(found.parse_config({}, "default").words, whole=found.decides_applications)


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
        return f"{matched} in partition {printable(self.partition)}: {counted(len(self.rows), 'decision')}{older}"


async def stories(history: History, name: str, models: Models) -> list[Story]:
    """Every application `name` names or a task of which it names, each with the decisions
    about it: under Kueue a workload's from the workload or any of its pods; elsewhere an
    application's from its name, a task's from the task's."""
    found = []
    for partition, app, task, seq in _named(name, await history.submissions_naming(name, limit=SHOWN)):
        terms = terms_of(model_at(models, partition, seq))
        tasks = _tasks_of(partition, app, await history.submissions_naming(app, limit=SHOWN)) if task is None or terms.whole else (task,)
        rows = await history.decisions_about(app, *tasks, limit=SHOWN)
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


@dataclass(frozen=True)
class QueueStory:
    """What a queue of any model went through (a YuniKorn queue by its path, a ClusterQueue, a
    LocalQueue for the ClusterQueue it points to, a Kueue cohort for its ClusterQueues, a
    Volcano queue): the decisions placing or admitting into it, taking from it and taking for
    it, oldest first, counted by what they did to it."""

    partition: str
    kind: str  # in the model's words: ClusterQueue, LocalQueue, cohort, queue
    name: str
    queues: tuple[str, ...]  # the leaf queues (ClusterQueues) it stands for
    leaves: str  # what the model calls those (`Words.queues`)
    rows: list[LogRow]
    counted: dict[str, int]
    cut: bool
    described: tuple[str, ...]  # whose usage is told: the queue itself, else the leaf queues it stands for
    peers: tuple[str, ...]  # the queues that could use what it leaves unused

    def heading(self) -> str:
        stands = f" ({self.leaves} {listing([printable(q) for q in self.queues])})" if self.queues != (self.name,) else ""
        said = "; ".join(f"{what} {number}" for what, number in self.counted.items() if number) or "nothing decided about it"
        older = " (the newest; older ones left out)" if self.cut else ""
        return f"{self.kind} {printable(self.name)}{stands} in partition {printable(self.partition)}: {counted(len(self.rows), 'decision')}{older}: {said}"


async def queue_stories(history: History, name: str, configs: list[LogRow]) -> list[QueueStory]:
    """The story of each partition's queue, LocalQueue or cohort called `name`, as its newest
    configuration defines it."""
    latest: dict[str, LogRow] = {}
    for row in configs:
        latest[row.partition] = row
    found = []
    for partition, row in sorted(latest.items()):
        event = decode_log_event(row.payload)
        assert isinstance(event, ConfigApplied)
        try:
            configured = configured_alone(event)
        except Rejected:
            continue
        kind, queues = _queue_named(configured, name)
        if not queues:
            continue
        rows = await history.decisions_about(*queues, limit=SHOWN)
        about = [(r, d) for r in rows if (d := decode_decision(r.payload)).partition == partition and _in_queues(d, queues)]
        counted: dict[str, int] = {"placed or admitted": 0, "taken from it": 0, "taken for it": 0, "waits told": 0}
        for _, decision in about:
            for what in _done_to(decision, queues):
                counted[what] += 1
        described = (name,) if name in configured.queues else queues
        story = QueueStory(
            partition, kind, name, queues, configured.words.queues, [r for r, _ in about], counted, len(rows) == SHOWN, described, _peers(configured, described)
        )
        found.append(story)
    return found


def _peers(p: PartitionState, described: tuple[str, ...]) -> tuple[str, ...]:
    """The leaf queues that could use what `described` leave unused: under Kueue the
    ClusterQueues of the same cohort tree, else every leaf queue outside their subtrees."""
    cohorts = getattr(p.settings, "cohorts", None)
    if isinstance(cohorts, dict):
        trees = {_root(p.settings, p.settings.cluster_queues[q].cohort) for q in described if q in p.settings.cluster_queues}
        trees.discard(None)
        return tuple(q for q, config in sorted(p.settings.cluster_queues.items()) if q not in described and _root(p.settings, config.cohort) in trees)
    return tuple(path for path, queue in sorted(p.queues.items()) if queue.leaf and not set(described) & set(queue.lineage))


def _root(settings: Any, cohort: str | None) -> str | None:
    """The top of the cohort tree `cohort` lies in."""
    chain = _cohort_chain(settings, cohort)
    return chain[-1] if chain else None


def _queue_named(p: PartitionState, name: str) -> tuple[str, tuple[str, ...]]:
    """What `name` is among `p`'s queues, in the model's words, and the leaf queues it stands for."""
    words = p.words
    leaf_word = words.queue
    if name in p.queues:
        queue = p.queues[name]
        return (leaf_word if queue.leaf else "queue"), (name,) if queue.leaf else tuple(path for path, q in p.queues.items() if q.leaf and name in q.lineage)
    if name in p.aliases:
        return words.alias or "alias", (p.aliases[name],)
    cohorts = getattr(p.settings, "cohorts", None)
    if isinstance(cohorts, dict) and name in cohorts:  # Kueue: a cohort stands for the ClusterQueues under it
        members = tuple(queue for queue, config in p.settings.cluster_queues.items() if _under(p.settings, config.cohort, name))
        return "cohort", members
    return "", ()


def _under(settings: Any, cohort: str | None, name: str) -> bool:
    """Whether cohort `cohort` is `name` or lies under it (Kueue's nested cohorts)."""
    return name in _cohort_chain(settings, cohort)


def _cohort_chain(settings: Any, cohort: str | None) -> list[str]:
    """`cohort`, then each cohort above it (a loop in a log of another version ends the chain)."""
    chain: list[str] = []
    while cohort is not None and cohort not in chain:
        chain.append(cohort)
        parent = settings.cohorts.get(cohort)
        cohort = getattr(parent, "parent", None) if parent is not None else None
    return chain


def _in_queues(decision: Decision, queues: tuple[str, ...]) -> bool:
    return bool(_done_to(decision, queues))


def _done_to(decision: Decision, queues: tuple[str, ...]) -> list[str]:
    """What `decision` did to the queues: placed or admitted into them, took from them (its
    victims there, a workload evicted from them), took for them (a preemptor of theirs), told
    one of theirs why it waits."""
    done = []
    queue = getattr(decision, "queue", None)
    match decision:
        case Allocated() | Admitted() if queue in queues:
            done.append("placed or admitted")
        case Blocked() if queue in queues:
            done.append("waits told")
        case Preempted() | QuotaEnforced():
            if any(victim.queue in queues for victim in decision.victims):
                done.append("taken from it")
            if isinstance(decision, Preempted) and queue in queues:
                done.append("taken for it")
        case Evicted() if queue in queues:
            done.append("taken from it")
    return done


async def closest_name(history: History, name: str) -> str | None:
    """The application or task of the newest submissions `name` is probably a misspelling of."""
    known: dict[str, None] = {}
    for row in await history.latest_submissions(500):
        event = decode_log_event(row.payload)
        if isinstance(event, TaskSubmitted | TaskBound):
            known.update(dict.fromkeys([event.task, event.app or event.task]))
        elif isinstance(event, AppSubmitted):
            known[event.app] = None
    return closest(name, known)
