"""Volcano's enqueue: a job that has not started is let in if its queue is open and has room
under its capability (and its ancestors', under hierarchy) for its gang's request (the first
`min_available` tasks) beside what it holds, less what preemption could take back (its
elastic resources: running tasks beyond their job's gang), and what was let in before it this
session. A job that has started is always in. Without the enqueue action, every job of an open
queue is in.

The jobs not started are the idle ones (`_backlog`), in groups of one gang request: on the same
state of their queue (what was let in before them), enqueue refuses the jobs of a group alike.
So each group is judged once per state of its queue, its first job after each job let in, and
the rest of it is refused by the same reason, told by group at the end of the session.

A queue refused whole whose every idle job was already told why is quiet (`KeptJobs.quiet`):
later sessions pass it over until one of its jobs changes, or the cluster's total or the
guarantees its most rests on do (without hierarchy, a queue's judgment rests on nothing else:
what it holds, its elastic jobs and its idle ones are its jobs'), so that a session judges
the queues that changed, not every queue with idle jobs."""

from __future__ import annotations

from ._session import Segment, Session
from ._shares import summed

__all__ = ["admit_open", "enqueue"]

_PAST = 1 << 200  # past every order key


def enqueue(s: Session) -> None:
    inqueue: dict[str, dict[str, int]] = {}
    elastic = s.kept.elastic  # of the started jobs
    s.started_in = True  # started: always in
    quiet = _quiet(s)
    ordered = sorted(s.idle.queues.keys() - quiet.keys(), key=lambda q: s.queue_key(q))  # enqueue changes no share: the order holds
    for queue in ordered:
        groups = s.idle.queues[queue].groups
        if s.config.queues[queue].closed:
            closed = [(group, -1, _PAST, f"enqueue: queue {queue} is closed: it takes no new jobs") for group in groups.values()]
            _tell_refused(s, queue, closed, quiet)
            continue
        segments: list[Segment] = []
        refused: dict[tuple[tuple[str, int], ...], tuple[int, str]] = {}  # per group, since the last job let in: from where, and why
        cursor, let_in = -1, False
        while True:
            heads = [(head, group) for group in groups.values() if group.gang not in refused and (head := group.first_after(cursor)) is not None]
            if not heads:
                break
            (key, job_id), group = min(heads, key=lambda head: head[0][0])
            gang = dict(group.gang)
            refusal = s.quotas.enqueueable(queue, gang, inqueue, elastic)
            if refusal:
                refused[group.gang] = (key, f"enqueue: {refusal}")
            else:
                for limited in s.quotas.lineage(queue):
                    inqueue[limited] = summed((inqueue.get(limited, {}), gang))
                s.admit_idle(job_id)
                let_in = True
                segments += [(groups[gang_of], low, key, why) for gang_of, (low, why) in refused.items()]
                refused = {}
            cursor = key
        segments += [(groups[gang_of], low, _PAST, why) for gang_of, (low, why) in refused.items()]
        _tell_refused(s, queue, segments, quiet if not let_in else None)


def _quiet(s: Session) -> dict[str, None]:
    """The queues quiet since the last session (`KeptJobs.quiet`), none if what their judgments
    rested on moved (all under hierarchy: an ancestor's room is its other leaves')."""
    kept = s.kept
    guarantees = s.quotas.guarantees
    basis = None if guarantees is None else (tuple(sorted(s.p.capacity.items())), tuple(sorted(guarantees.items())))
    if basis is None or basis != kept.quiet_basis:
        kept.quiet.clear()
        kept.quiet_basis = basis
    return kept.quiet


def _tell_refused(s: Session, queue: str, segments: list[Segment], quiet: dict[str, None] | None) -> None:
    """`queue`'s idle jobs refused, to be told; quiet from now on if it was refused whole
    (`quiet` given), every job was told so already and no job of it changed in this session."""
    s.tell_idle(queue, segments)
    told = all(group.told.keys() == {(why,)} for group, _, _, why in segments)
    if quiet is not None and told and s.kept.quiet_basis is not None and queue not in s.kept.touched:
        quiet[queue] = None


def admit_open(s: Session) -> None:
    """Without enqueue: every started job, and every job of an open queue, is in."""
    for job_id in list(s.idle.jobs()):
        s.admit_idle(job_id)
    s.started_in = True
    for job in sorted((s.jobs[job_id] for job_id in s.admitted), key=lambda job: job.seq):
        if s.closed(job):
            s.admitted.discard(job.id)
            s.note(job.pending, f"queue {job.queue} is closed: it takes no new jobs")
