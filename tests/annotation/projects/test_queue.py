"""The task queue on real PostgreSQL: atomic claims, leases, heartbeats, assignment."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.models import Episode, Project, Task, TaskEvent, TaskStatus
from annotation.projects import queue
from backend.accounts.roles import Role


def make_tasks(project: Project, count: int, priority: int = 0) -> list[Task]:
    return Task.objects.bulk_create(
        Task(
            project=project,
            external_id=f"t{priority}-{i}",
            instruction=f"task {i}",
            priority=priority,
        )
        for i in range(count)
    )


def projects(*items: Project):
    return Project.objects.filter(pk__in=[p.pk for p in items])


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_claimers_share_twenty_tasks_without_double_assignment(make_user, project):
    make_tasks(project, 20)
    annotators = [make_user(f"ann{i}", project, Role.ANNOTATOR) for i in range(50)]
    barrier = threading.Barrier(len(annotators))
    claimed: dict[str, int] = {}
    refused: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def claim(user):
        try:
            barrier.wait()
            try:
                result = queue.claim_next_task(user, projects(project))
            except queue.NoTaskAvailable as error:
                with lock:
                    refused.append(error.message)
            else:
                with lock:
                    claimed[user.username] = result.task.pk
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(user,)) for user in annotators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(claimed) == 20
    assert sorted(claimed.values()) == sorted(Task.objects.values_list("pk", flat=True))
    assert len(refused) == 30
    assert all("No task is available" in message for message in refused)
    per_task = TaskEvent.objects.filter(kind=TaskEvent.Kind.CLAIMED).values_list(
        "task_id", flat=True
    )
    assert sorted(per_task) == sorted(claimed.values())
    for task in Task.objects.select_related("assignee"):
        assert task.status == TaskStatus.IN_PROGRESS
        assert claimed[task.assignee.username] == task.pk


@pytest.mark.django_db
def test_claim_prefers_own_assigned_task_over_higher_priority_pool_task(make_user, project):
    manager = make_user("mona", project, Role.MANAGER)
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 1, priority=100)
    mine = make_tasks(project, 2, priority=1)
    queue.assign_tasks(mine, ann, manager)

    claim = queue.claim_next_task(ann, projects(project))

    assert claim.task.pk == mine[0].pk
    assert "assigned to you" in claim.reason
    assert Task.objects.get(pk=claim.task.pk).claim_reason == claim.reason
    event = TaskEvent.objects.get(task=claim.task, kind=TaskEvent.Kind.CLAIMED)
    assert event.reason == claim.reason and event.assignee == ann


@pytest.mark.django_db
def test_pool_claim_takes_highest_priority_and_records_why(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 3, priority=1)
    urgent = make_tasks(project, 1, priority=9)[0]

    claim = queue.claim_next_task(ann, projects(project))

    assert claim.task.pk == urgent.pk
    assert claim.reason == f"highest priority (9) in the pool of {project.name}"


@pytest.mark.django_db
def test_tasks_assigned_to_someone_else_are_not_claimable(make_user, project):
    manager = make_user("mona", project, Role.MANAGER)
    ann = make_user("ann", project, Role.ANNOTATOR)
    other = make_user("otto", project, Role.ANNOTATOR)
    queue.assign_tasks(make_tasks(project, 2), other, manager)

    with pytest.raises(queue.NoTaskAvailable):
        queue.claim_next_task(ann, projects(project))


@pytest.mark.django_db
def test_second_claim_by_the_same_annotator_resumes_the_held_task(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 5)
    first = queue.claim_next_task(ann, projects(project))
    second = queue.claim_next_task(ann, projects(project))

    assert second.resumed and second.task.pk == first.task.pk and second.lease_id == first.lease_id
    assert Task.objects.filter(status=TaskStatus.IN_PROGRESS).count() == 1


@pytest.mark.django_db
def test_lapsed_lease_returns_its_task_to_the_pool(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 1)
    claim = queue.claim_next_task(ann, projects(project))

    assert queue.return_lapsed_leases() == 0  # still live
    later = timezone.now() + queue.lease_duration() + timedelta(seconds=1)
    assert queue.return_lapsed_leases(now=later) == 1

    task = Task.objects.get(pk=claim.task.pk)
    assert (task.status, task.assignee, task.lease_id) == (TaskStatus.QUEUED, None, None)
    assert TaskEvent.objects.filter(task=task, kind=TaskEvent.Kind.LEASE_LAPSED).count() == 1
    with pytest.raises(queue.LeaseLost):
        queue.heartbeat(task.pk, claim.lease_id, ann)
    other = make_user("otto", project, Role.ANNOTATOR)
    assert queue.claim_next_task(other, projects(project)).task.pk == task.pk


@pytest.mark.django_db
def test_a_lapsed_task_with_a_running_episode_is_left_to_the_episode(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 1)
    claim = queue.claim_next_task(ann, projects(project))
    Episode.objects.create(task=claim.task, annotator=ann)
    later = timezone.now() + queue.lease_duration() + timedelta(seconds=1)
    assert queue.return_lapsed_leases(now=later) == 0  # the episode is paused instead
    assert Task.objects.get(pk=claim.task.pk).status == TaskStatus.IN_PROGRESS


@pytest.mark.django_db
def test_heartbeat_keeps_the_lease_past_its_first_expiry(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 1)
    claim = queue.claim_next_task(ann, projects(project))
    # The lease is about to lapse; a heartbeat now moves the expiry a whole lease ahead.
    Task.objects.filter(pk=claim.task.pk).update(
        lease_expires_at=timezone.now() + timedelta(seconds=1)
    )

    new_expiry = queue.heartbeat(claim.task.pk, claim.lease_id, ann)

    assert new_expiry > claim.lease_expires_at - timedelta(seconds=5)
    assert queue.return_lapsed_leases(now=timezone.now() + timedelta(seconds=30)) == 0
    assert Task.objects.get(pk=claim.task.pk).status == TaskStatus.IN_PROGRESS


@pytest.mark.django_db
def test_heartbeat_with_a_wrong_lease_or_by_another_user_is_refused(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    other = make_user("otto", project, Role.ANNOTATOR)
    make_tasks(project, 1)
    claim = queue.claim_next_task(ann, projects(project))
    before = Task.objects.get(pk=claim.task.pk).lease_expires_at

    with pytest.raises(queue.LeaseLost):
        queue.heartbeat(claim.task.pk, uuid.uuid4(), ann)
    with pytest.raises(queue.LeaseLost):
        queue.heartbeat(claim.task.pk, claim.lease_id, other)
    assert Task.objects.get(pk=claim.task.pk).lease_expires_at == before


@pytest.mark.django_db
def test_unassign_leaves_tasks_in_progress_alone(make_user, project):
    manager = make_user("mona", project, Role.MANAGER)
    ann = make_user("ann", project, Role.ANNOTATOR)
    tasks = make_tasks(project, 3)
    queue.assign_tasks(tasks, ann, manager)
    held = queue.claim_next_task(ann, projects(project)).task

    assert queue.unassign_tasks(tasks, manager) == queue.Unassignment(
        unassigned=2, not_assigned=0, started=1
    )
    assert Task.objects.get(pk=held.pk).status == TaskStatus.IN_PROGRESS
    assert Task.objects.filter(status=TaskStatus.QUEUED, assignee=None).count() == 2


@pytest.mark.django_db
def test_unassigning_tells_tasks_nobody_held_from_tasks_already_started(
    make_user, project, client_for
):
    manager = make_user("mona", project, Role.MANAGER)
    ann = make_user("ann", project, Role.ANNOTATOR)
    started, waiting, pooled = make_tasks(project, 3)
    queue.assign_tasks([started, waiting], ann, manager)
    assert queue.claim_next_task(ann, projects(project)).task == started
    stored = {t.pk: (t.status, t.assignee_id) for t in Task.objects.all()}
    events = TaskEvent.objects.count()
    client = client_for(manager)

    def unassign(*tasks: Task) -> dict:
        body = {"task_ids": [t.pk for t in tasks]}
        response = client.post(f"/api/projects/{project.pk}/unassign/", body, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    assert unassign(pooled) == {
        "unassigned": 0,
        "not_assigned": 1,
        "started": 0,
        "left_alone": 1,
        "message": "No task went back to the pool. 1 task was not assigned to anyone.",
    }
    assert unassign(started) == {
        "unassigned": 0,
        "not_assigned": 0,
        "started": 1,
        "left_alone": 1,
        "message": "No task went back to the pool. 1 task already started: left alone.",
    }
    # Neither was assigned to be taken back: nothing changed, and no event was written.
    assert {t.pk: (t.status, t.assignee_id) for t in Task.objects.all()} == stored
    assert TaskEvent.objects.count() == events

    more = make_tasks(project, 3, priority=1)
    assert unassign(started, waiting, pooled, *more)["message"] == (
        "1 task back in the pool. 4 tasks were not assigned to anyone. "
        "1 task already started: left alone."
    )
    statuses = {t.pk: (t.status, t.assignee_id) for t in Task.objects.all()}
    assert statuses[waiting.pk] == (TaskStatus.QUEUED, None)
    assert statuses[started.pk] == (TaskStatus.IN_PROGRESS, ann.pk)
    assert statuses[pooled.pk] == (TaskStatus.QUEUED, None)


@pytest.mark.django_db
def test_assigning_a_task_in_progress_is_refused_and_changes_nothing(make_user, project):
    manager = make_user("mona", project, Role.MANAGER)
    ann = make_user("ann", project, Role.ANNOTATOR)
    other = make_user("otto", project, Role.ANNOTATOR)
    tasks = make_tasks(project, 2)
    held = queue.claim_next_task(ann, projects(project)).task

    with pytest.raises(queue.AssignmentRefused):
        queue.assign_tasks(tasks, other, manager)
    assert Task.objects.get(pk=held.pk).assignee == ann
    assert not Task.objects.filter(assignee=other).exists()


@pytest.mark.django_db
def test_submit_ends_the_lease_and_the_task_is_not_claimed_again(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 1)
    claim = queue.claim_next_task(ann, projects(project))

    task = queue.submit_task(claim.task.pk, claim.lease_id, ann)

    assert (task.status, task.lease_id) == (TaskStatus.SUBMITTED, None)
    with pytest.raises(queue.NoTaskAvailable):
        queue.claim_next_task(ann, projects(project))
    with pytest.raises(queue.LeaseLost):
        queue.submit_task(claim.task.pk, claim.lease_id, ann)


@pytest.mark.django_db
def test_claim_release_heartbeat_over_the_api(make_user, project, client_for):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 2)
    client = client_for(ann)

    claimed = client.post("/api/tasks/claim/", {"project": project.pk}, format="json")
    assert claimed.status_code == 200, claimed.content
    body = claimed.json()
    task_id, lease = body["task"]["id"], body["lease_id"]
    assert body["reason"].startswith("highest priority")

    beat = client.post(f"/api/tasks/{task_id}/heartbeat/", {"lease_id": lease}, format="json")
    assert beat.status_code == 200 and beat.json()["lease_expires_at"]

    released = client.post(f"/api/tasks/{task_id}/release/", {"lease_id": lease}, format="json")
    assert released.status_code == 200 and released.json()["status"] == "queued"

    stale = client.post(f"/api/tasks/{task_id}/heartbeat/", {"lease_id": lease}, format="json")
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "lease_lost"


@pytest.mark.django_db
def test_empty_queue_over_the_api_says_no_task_available(make_user, project, client_for):
    ann = make_user("ann", project, Role.ANNOTATOR)
    response = client_for(ann).post("/api/tasks/claim/", {}, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_task_available"


@pytest.mark.django_db
def test_holder_resumes_a_lapsed_lease_before_the_reaper_returns_it(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 2)
    first = queue.claim_next_task(ann, projects(project))
    Task.objects.filter(pk=first.task.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )

    again = queue.claim_next_task(ann, projects(project))

    assert again.resumed and again.task.pk == first.task.pk
    assert again.lease_expires_at > timezone.now()
    assert queue.return_lapsed_leases() == 0


def _queries(action) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        action()
    return [query["sql"] for query in captured.captured_queries]


@pytest.mark.django_db
def test_unassigning_or_returning_many_tasks_costs_no_more_queries_than_a_few(make_user, project):
    manager = make_user("mona", project, Role.MANAGER)
    annotators = [make_user(f"ann{i}", project, Role.ANNOTATOR) for i in range(20)]
    tasks = make_tasks(project, 44)
    few, many = tasks[:2], tasks[2:22]
    for task, ann in zip(few + many, annotators * 2, strict=False):
        queue.assign_tasks([task], ann, manager)

    # One assignee read per task was a query per task of a manager's selection.
    assert len(_queries(lambda: queue.unassign_tasks(few, manager))) == len(
        _queries(lambda: queue.unassign_tasks(many, manager))
    )
    assert TaskEvent.objects.filter(kind=TaskEvent.Kind.UNASSIGNED).count() == 22
    assert set(
        TaskEvent.objects.filter(kind=TaskEvent.Kind.UNASSIGNED).values_list("assignee", flat=True)
    ) == {a.pk for a in annotators}

    claimed = [queue.claim_next_task(ann, projects(project)) for ann in annotators]
    Task.objects.filter(pk__in=[c.task.pk for c in claimed[:2]]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    returned_few = _queries(queue.return_lapsed_leases)
    Task.objects.filter(pk__in=[c.task.pk for c in claimed[2:]]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert len(returned_few) == len(_queries(queue.return_lapsed_leases))
    lapsed = TaskEvent.objects.filter(kind=TaskEvent.Kind.LEASE_LAPSED)
    assert {(e.task_id, e.assignee_id) for e in lapsed} == {
        (c.task.pk, ann.pk) for c, ann in zip(claimed, annotators, strict=True)
    }
    assert Task.objects.filter(status=TaskStatus.QUEUED, assignee=None).count() == 44


@pytest.mark.django_db
def test_submitting_reads_no_user_row(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_tasks(project, 1)
    claim = queue.claim_next_task(ann, projects(project))

    sql = _queries(lambda: queue.submit_task(claim.task.pk, claim.lease_id, ann))

    assert not [q for q in sql if q.startswith('SELECT "accounts_user"')], sql
    event = TaskEvent.objects.get(kind=TaskEvent.Kind.SUBMITTED)
    assert (event.task_id, event.actor_id, event.assignee_id) == (claim.task.pk, ann.pk, ann.pk)
