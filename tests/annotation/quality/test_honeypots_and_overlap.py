"""Honeypots and overlap on the database's side (``annotation.quality.honeypots``, ``overlap``,
``kept`` and the claim rules in ``annotation.projects.queue``): who gets which task, how runs
are scored against gold, how overlapping episodes are compared, what exports keep, and the bad
input each refuses with nothing stored. The whole loop over the socket is in
``tests/e2e/test_quality_control.py``."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation import jobs
from annotation.datasets.finals import episodes_for
from annotation.datasets.records import Filters
from annotation.episodes.reviews import review_episode
from annotation.models import (
    Agreement,
    Decision,
    Episode,
    GoldStep,
    GoldVerdict,
    Honeypot,
    HoneypotRun,
    Proposal,
    QualityHold,
    Step,
    Task,
    TaskEvent,
    TaskStatus,
)
from annotation.projects import queue
from annotation.quality import checks, gold, honeypots, kept, overlap, scorecards
from backend.accounts.roles import Role
from model_serving.models import ModelVersion
from model_serving.uitars import assistant_text
from tests.support.fake_model_server import Reply, serving
from tests.support.pngs import solid_png
from vm_pool.actions import Action, ScreenSize
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db

TARGET = [640, 400]
RIGHT = {"type": "click", "point": TARGET}
WRONG = {"type": "click", "point": [200, 150]}
OFF = {"type": "click", "point": [680, 400]}  # 40 px off target
DONE = {"type": "finished", "content": ""}


@pytest.fixture
def people(project, make_user, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    names = {"gina": Role.ANNOTATOR, "ann": Role.ANNOTATOR, "bob": Role.ANNOTATOR,
             "cal": Role.ANNOTATOR, "mona": Role.MANAGER}  # fmt: skip
    return {name: make_user(name, project, role) for name, role in names.items()}


def worked(task, user, decisions, proposals=None, outcome="finished"):
    """An ended episode of ``user`` on ``task``: (decision, final action) per step, each step
    shown ``proposals[i]`` (the right click, then finishing, by default)."""
    proposals = proposals or [RIGHT, DONE]
    screen = store_screenshot(solid_png(1280, 800))
    episode = Episode.objects.create(
        task=task, annotator=user, ended_at=timezone.now(), outcome=outcome
    )
    for index, ((decision, action), shown) in enumerate(zip(decisions, proposals, strict=True), 1):
        step = Step.objects.create(episode=episode, index=index, observation=screen)
        Proposal.objects.create(
            step=step, raw_text=f"Thought: t\nAction: {shown}", thought="t", action=shown,
            model_name="ui-tars", model_version="v1", latency_ms=300,
        )  # fmt: skip
        Step.objects.filter(pk=step.pk).update(
            decision=decision, final_thought="t", final_action=action, decided_by=user,
            decided_at=timezone.now(), decision_ms=1000,
        )  # fmt: skip
    TaskEvent.objects.create(task=task, kind=TaskEvent.Kind.SUBMITTED, actor=user)
    return episode


ACCEPT_RIGHT = [(Decision.ACCEPTED, RIGHT), (Decision.ACCEPTED, DONE)]


@pytest.fixture
def honeypot(project, people):
    """Task g1 made a honeypot from gina's accepted episode; step 1 shows a wrong decoy."""
    task = Task.objects.create(project=project, external_id="g1", instruction="Click it")
    source = worked(task, people["gina"], ACCEPT_RIGHT)
    review_episode(source, people["mona"], "accepted", None, "")
    region = {"type": "click", "region": [620, 380, 660, 420]}
    gold.set_gold(source, people["mona"], [{"step": 1, "answers": [region]}, {"step": 2}])
    Task.objects.filter(pk=task.pk).update(status=TaskStatus.SUBMITTED)
    made = honeypots.make_honeypot(
        source, people["mona"], {"1": {"thought": "Click the logo.", "action": WRONG}}
    )
    project.honeypot_rate = 0.2
    project.save()
    return made


def claim(user, project):
    return queue.claim_next_task(user, type(project).objects.filter(pk=project.pk)).task


def test_gold_is_handed_out_never_twice_in_a_row_and_never_to_its_source(
    honeypot, project, people, monkeypatch
):
    ordinary = [
        Task.objects.create(project=project, external_id=f"t{i}", instruction="Click it")
        for i in (1, 2)
    ]
    assert Task.objects.get(pk=honeypot.task_id).status == TaskStatus.GOLD
    monkeypatch.setattr(queue.random, "random", lambda: 0.0)  # every claim draws gold
    ann = people["ann"]
    first = claim(ann, project)
    assert first.pk == honeypot.task_id
    # The claim reads as any pool claim.
    assert first.claim_reason == f"highest priority (0) in the pool of {project.name}"
    queue.end_held_task(first, TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED, ann)
    assert Task.objects.get(pk=honeypot.task_id).status == TaskStatus.GOLD  # not the pool
    second = claim(ann, project)
    assert second.pk == ordinary[0].pk  # no gold twice in a row
    queue.end_held_task(second, TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED, ann)
    assert claim(ann, project).pk == ordinary[1].pk  # gold once per annotator
    # Gina's own episode gave the gold: with only that left, she gets nothing.
    with pytest.raises(queue.NoTaskAvailable):
        claim(people["gina"], project)


def test_an_annotator_on_a_gold_task_reads_it_as_any_other(
    honeypot, project, people, client_for, monkeypatch
):
    """No one else's events (the source episode's submit, its review), no source, no evaluator
    (its expected values are the answer): a fresh task with an evaluator reads the same."""
    Task.objects.filter(pk=honeypot.task_id).update(
        evaluator={"func": "exact_match", "expected": {"type": "rule", "rules": {"expected": "42"}}}
    )
    ordinary = Task.objects.create(
        project=project, external_id="t1", instruction="Click it",
        evaluator={"func": "exact_match", "expected": {"type": "rule", "rules": {"expected": "7"}}},
    )  # fmt: skip
    monkeypatch.setattr(queue.random, "random", lambda: 0.0)  # the claim draws gold
    ann, mona = people["ann"], people["mona"]
    assert claim(ann, project).pk == honeypot.task_id
    reader = client_for(ann)
    gold_task = reader.get(f"/api/tasks/{honeypot.task_id}/").json()
    assert [(e["kind"], e["actor"]) for e in gold_task["events"]] == [("claimed", "ann")]
    assert (gold_task["source"], gold_task["evaluator"], gold_task["setup"]) == (None, None, None)
    listed = reader.get("/api/tasks/", {"assignee__username": "ann"}).json()["results"]
    assert [(t["id"], t["evaluator"]) for t in listed] == [(honeypot.task_id, None)]
    queue.end_held_task(claim(ann, project), TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED, ann)
    # The manager still reads everything.
    managed = client_for(mona).get(f"/api/tasks/{ordinary.pk}/").json()
    assert managed["evaluator"]["expected"]["rules"]["expected"] == "7"
    assert {e["actor"] for e in client_for(mona).get(
        f"/api/tasks/{honeypot.task_id}/").json()["events"]} >= {"gina", "mona", "ann"}  # fmt: skip


def test_a_task_left_reads_the_same_whether_gold_overlapped_or_ordinary(
    honeypot, project, people, client_for, monkeypatch
):
    """The reply to submit and release, the task's detail after it, and the episode's task
    status: what the annotator did, never what became of the task (gold again, back in the
    pool for overlap). The manager reads what it is."""
    project.overlap = 2
    project.save(update_fields=["overlap"])
    for n in (1, 2):
        Task.objects.create(project=project, external_id=f"t{n}", instruction="Click it")
    monkeypatch.setattr(queue.random, "random", lambda: 0.0)  # the first claim draws gold
    ann, reader = people["ann"], client_for(people["ann"])
    left = {}
    for action in ("submit", "submit", "release"):
        claimed = reader.post("/api/tasks/claim/", {"project": project.pk}, format="json").json()
        task_id = claimed["task"]["id"]
        body = {"lease_id": claimed["lease_id"]}
        reply = reader.post(f"/api/tasks/{task_id}/{action}/", body, format="json").json()
        detail = reader.get(f"/api/tasks/{task_id}/")
        left[task_id] = (reply["status"], reply["assignee"], detail.status_code)
    gold_id, overlapped, released = left
    assert left == {
        gold_id: ("submitted", "ann", 404),
        overlapped: ("submitted", "ann", 404),
        released: ("queued", None, 404),
    }
    assert gold_id == honeypot.task_id
    manager = client_for(people["mona"])
    assert [manager.get(f"/api/tasks/{t}/").json()["status"] for t in left] == [
        "gold", "queued", "queued"]  # fmt: skip
    # An episode's task status reads as its annotator left it, to them.
    run = worked(honeypot.task, ann, ACCEPT_RIGHT)
    given_back = worked(Task.objects.get(pk=released), ann, ACCEPT_RIGHT, outcome="abandoned")
    seen = [reader.get(f"/api/episodes/{e.pk}/").json()["task_status"] for e in (run, given_back)]
    assert seen == ["submitted", "queued"]
    assert manager.get(f"/api/episodes/{run.pk}/").json()["task_status"] == "gold"


def test_a_task_given_back_does_not_come_straight_back_to_whoever_gave_it_back(project, people):
    """As a honeypot never does: a task released, or whose lease lapsed, goes to someone else
    or comes back once its holder has been handed another, or when nothing else is left."""
    first, second = (
        Task.objects.create(project=project, external_id=f"t{n}", instruction="Click it",
                            priority=priority)
        for n, priority in ((1, 5), (2, 1))
    )  # fmt: skip
    ann, bob = people["ann"], people["bob"]
    held = queue.claim_next_task(ann, type(project).objects.filter(pk=project.pk))
    assert held.task.pk == first.pk
    queue.release_task(first.pk, held.lease_id, ann)
    again = claim(ann, project)
    assert again.pk == second.pk  # not the task just given back, though it comes first
    queue.end_held_task(again, TaskStatus.QUEUED, TaskEvent.Kind.RELEASED, ann)
    assert claim(ann, project).pk == first.pk  # handed another since: it may come back
    assert claim(bob, project).pk == second.pk
    released = Task.objects.get(pk=first.pk)
    queue.end_held_task(released, TaskStatus.QUEUED, TaskEvent.Kind.RELEASED, ann)
    assert claim(ann, project).pk == first.pk  # only the task ann just gave back is left


def test_a_task_assigned_to_the_annotator_comes_before_gold(honeypot, project, people,
                                                             monkeypatch):  # fmt: skip
    """Their page lists what is assigned to them: a task from elsewhere first would be gold."""
    ann = people["ann"]
    mine = Task.objects.create(project=project, external_id="a1", instruction="Click it",
                               status=TaskStatus.ASSIGNED, assignee=ann)  # fmt: skip
    monkeypatch.setattr(queue.random, "random", lambda: 0.0)  # every draw is gold
    first = claim(ann, project)
    assert first.pk == mine.pk and first.claim_reason.startswith("assigned to you")
    queue.end_held_task(first, TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED, ann)
    assert claim(ann, project).pk == honeypot.task_id  # then the pool's turn draws gold


def test_with_only_gold_left_no_one_gets_gold_twice_in_a_row(honeypot, project, people):
    other = Task.objects.create(project=project, external_id="g2", instruction="Click it")
    source = worked(other, people["gina"], ACCEPT_RIGHT)
    review_episode(source, people["mona"], "accepted", None, "")
    gold.set_gold(source, people["mona"], None)
    honeypots.make_honeypot(source, people["mona"])
    bob = people["bob"]
    first = claim(bob, project)  # the pool is empty: gold
    assert first.pk in (honeypot.task_id, other.pk)
    queue.end_held_task(first, TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED, bob)
    with pytest.raises(queue.NoTaskAvailable):
        claim(bob, project)
    assert Task.objects.filter(status=TaskStatus.IN_PROGRESS).count() == 0
    # A honeypot given back, with nothing else left, comes back as an ordinary task would.
    cal = people["cal"]
    held = claim(cal, project)
    queue.end_held_task(held, TaskStatus.QUEUED, TaskEvent.Kind.RELEASED, cal)
    assert Task.objects.get(pk=held.pk).status == TaskStatus.GOLD
    assert claim(cal, project).pk == held.pk


def test_a_run_shows_the_recorded_answers_while_on_gold_and_is_scored(honeypot, people):
    task = honeypot.task
    # ann corrects the decoy to the right click, then finishes: all right.
    ann_run = worked(task, people["ann"], [(Decision.CORRECTED, RIGHT), (Decision.ACCEPTED, DONE)],
                     [WRONG, DONE])  # fmt: skip
    HoneypotRun.objects.create(episode=ann_run, honeypot=honeypot)
    shown = honeypots.answer_for(ann_run.steps.get(index=1))
    assert (shown.thought, shown.action) == ("Click the logo.", Action.from_json(WRONG))
    assert shown.raw_text.startswith("Thought: Click the logo.\nAction: click(start_box=")
    assert honeypots.answer_for(ann_run.steps.get(index=2)).action == Action.from_json(DONE)
    checks.check_quality(ann_run.pk)
    assert [(v.step.index, v.right) for v in GoldVerdict.objects.filter(run__episode=ann_run)] == [
        (1, True), (2, True)]  # fmt: skip

    # bob approves the decoy: a miss, and scoring stops there; off gold, the model is asked.
    bob_run = worked(task, people["bob"], [(Decision.ACCEPTED, WRONG), (Decision.ACCEPTED, DONE)],
                     [WRONG, DONE])  # fmt: skip
    HoneypotRun.objects.create(episode=bob_run, honeypot=honeypot)
    assert honeypots.answer_for(bob_run.steps.get(index=2)) is None
    verdicts = honeypots.score_run(bob_run.pk)
    assert [(v.step.index, v.right, v.reason) for v in verdicts] == [
        (1, False, "a wrong proposal was approved")]  # fmt: skip
    assert honeypots.score_run(bob_run.pk) == []  # once

    # cal corrects the recorded (right) finishing step to another action: a miss too.
    cal_run = worked(task, people["cal"], [(Decision.CORRECTED, RIGHT), (Decision.CORRECTED,
                     {"type": "wait"})], [WRONG, DONE])  # fmt: skip
    HoneypotRun.objects.create(episode=cal_run, honeypot=honeypot)
    assert [v.right for v in honeypots.score_run(cal_run.pk)] == [True, False]
    assert checks.gold_accuracy(task.project_id, people["cal"].pk) == 0.5

    # On another screen than the gold step's, only the model's own answers are shown.
    elsewhere = Episode.objects.create(task=task, annotator=people["bob"])
    HoneypotRun.objects.create(episode=elsewhere, honeypot=honeypot)
    other = store_screenshot(solid_png(1280, 800, (230, 230, 230)))
    assert (
        honeypots.answer_for(Step.objects.create(episode=elsewhere, index=1, observation=other))
        is None
    )


def test_a_run_shows_gold_first_as_the_runs_model_writes_under_its_name_and_fails_with_it(
    honeypot, project, people, settings
):
    """The run's version (B here) answers in 0-1000: gold is written so, the model's own answer
    follows it, both under the version's name; when the model fails, so does the step."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    own = "Thought: Wait for it.\nAction: wait()"
    screen = store_screenshot(solid_png(1280, 800))  # the gold steps' screen
    with serving(model="ui-tars-1.0-7b") as server:
        server.default = Reply.text(own, chunk_chars=8)
        b = ModelVersion.objects.create(
            name="ui-tars-1.0-ft", base_model="ui-tars-1.0-7b", base_url=server.base_url,
            coordinate_style="relative1000",
        )  # fmt: skip
        project.model_settings = {**project.model_settings, "candidates": 2}
        project.save(update_fields=["model_settings"])
        run = Episode.objects.create(task=honeypot.task, annotator=people["ann"], served_version=b)
        HoneypotRun.objects.create(episode=run, honeypot=honeypot)
        first = Step.objects.create(episode=run, index=1, observation=screen)
        jobs.propose_step(first.pk)
        wrong, size = Action.from_json(WRONG), ScreenSize(1280, 800)
        shown = list(first.proposals.order_by("rank"))
        assert [p.raw_text for p in shown] == [
            assistant_text("Click the logo.", wrong, size, "relative1000"),
            own,
        ]
        assert {(p.model_name, p.model_version) for p in shown} == {
            ("ui-tars-1.0-7b", "ui-tars-1.0-ft")}  # fmt: skip
        Step.objects.filter(pk=first.pk).update(
            decision=Decision.CORRECTED, final_thought="t", final_action=RIGHT,
            decided_by=people["ann"], decided_at=timezone.now(), decision_ms=900,
        )  # fmt: skip
        second = Step.objects.create(episode=run, index=2, observation=screen)
        assert honeypots.answer_for(second) is not None  # still on gold
        server.default = Reply.error(503, "overloaded")  # retried, and refused again
        jobs.propose_step(second.pk)
    (failed,) = second.proposals.all()
    assert (failed.raw_text, failed.invalid_reason.startswith("model unavailable")) == ("", True)


def test_a_gold_threshold_holds_new_episodes_for_review_and_feedback_is_told(
    honeypot, project, people, client_for
):
    project.gold_threshold = 0.8
    project.immediate_feedback = True
    project.save()
    bob = people["bob"]
    run = worked(honeypot.task, bob, [(Decision.ACCEPTED, WRONG), (Decision.ACCEPTED, DONE)],
                 [WRONG, DONE])  # fmt: skip
    HoneypotRun.objects.create(episode=run, honeypot=honeypot)
    checks.check_quality(run.pk)
    task = Task.objects.create(project=project, external_id="t1", instruction="Click it")
    later = worked(task, bob, ACCEPT_RIGHT)
    checks.check_quality(later.pk)
    hold = QualityHold.objects.get(episode=later)
    assert (hold.gold_accuracy, hold.threshold) == (0.0, 0.8)
    # Held work is left out of exports until a review accepts it; runs never enter.
    filters = Filters(project_id=project.pk)
    assert later.pk not in set(episodes_for(filters, "sft").values_list("pk", flat=True))
    assert run.pk not in set(episodes_for(filters, "sft").values_list("pk", flat=True))
    review_episode(later, people["mona"], "accepted", None, "")
    assert later.pk in set(episodes_for(filters, "sft").values_list("pk", flat=True))

    # Before his check ran, and from before his first gold: his work is held all the same.
    unchecked = worked(Task.objects.create(project=project, external_id="t2"), bob, ACCEPT_RIGHT)
    earlier = worked(Task.objects.create(project=project, external_id="t0"), bob, ACCEPT_RIGHT)
    Episode.objects.filter(pk=earlier.pk).update(ended_at=run.ended_at - timedelta(hours=1))
    exported = set(episodes_for(filters, "sft").values_list("pk", flat=True))
    assert not {unchecked.pk, earlier.pk} & exported
    assert not QualityHold.objects.filter(episode__in=[unchecked, earlier]).exists()
    # Another annotator exactly at the threshold is not held (7 of 100 right at 0.07, where
    # 0.07 × 100 is 7.000000000000001).
    project.gold_threshold = 0.07
    project.save()
    cal = people["cal"]
    cal_run = worked(honeypot.task, cal, ACCEPT_RIGHT)
    hundred = Step.objects.bulk_create(
        Step(episode=cal_run, index=i, observation=cal_run.steps.first().observation)
        for i in range(3, 103)
    )
    honeypot_run = HoneypotRun.objects.create(episode=cal_run, honeypot=honeypot)
    gold_step = GoldStep.objects.filter(step__episode__task=honeypot.task).first()
    GoldVerdict.objects.bulk_create(
        GoldVerdict(
            run=honeypot_run,
            step=step,
            gold=gold_step,
            annotator=cal,
            right=n < 7,
            shown_right=True,
            at=timezone.now(),
        )  # fmt: skip
        for n, step in enumerate(hundred)
    )
    assert checks.gold_accuracy(project.pk, cal.pk) == 0.07
    his = worked(Task.objects.create(project=project, external_id="t3"), cal, ACCEPT_RIGHT)
    assert his.pk in set(episodes_for(filters, "sft").values_list("pk", flat=True))
    assert bob.pk not in kept.gold_passing(project.pk, 0.07)
    assert kept.gold_passing(project.pk, 0.07) == {cal.pk}
    project.gold_threshold = 0.8
    project.save()

    # bob is told the right answer of his miss, and why a reviewer rejected his work.
    review_episode(run, people["mona"], "rejected", 1, "The logo is not the marker.")
    told = client_for(bob).get(f"/api/projects/{project.pk}/scorecards/mine/").json()["feedback"]
    assert [(t["kind"], t["task"], t["step"], t["why"]) for t in told] == [
        ("rejected", "g1", 1, "The logo is not the marker."),
        ("gold_miss", "g1", 1, "a wrong proposal was approved"),
    ]
    assert told[1]["right_answers"] == [{"type": "click", "region": [620, 380, 660, 420]}]
    project.immediate_feedback = False
    project.save()
    assert client_for(bob).get(f"/api/projects/{project.pk}/scorecards/mine/").json()[
        "feedback"] == []  # fmt: skip


def test_overlap_hands_a_task_to_k_different_annotators_and_compares_them(project, people):
    project.overlap = 2
    project.save()
    task = Task.objects.create(project=project, external_id="t1", instruction="Click it")
    ann, bob = people["ann"], people["bob"]
    first = claim(ann, project)
    queue.end_held_task(first, TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED, ann)
    assert Task.objects.get(pk=task.pk).status == TaskStatus.QUEUED  # one more annotator
    with pytest.raises(queue.NoTaskAvailable):
        claim(ann, project)  # never twice by one
    second = claim(bob, project)
    queue.end_held_task(second, TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED, bob)
    assert Task.objects.get(pk=task.pk).status == TaskStatus.SUBMITTED

    a = worked(task, ann, [(Decision.CORRECTED, RIGHT), (Decision.ACCEPTED, DONE)], [WRONG, DONE])
    b = worked(task, bob, [(Decision.ACCEPTED, WRONG), (Decision.ACCEPTED, DONE)], [WRONG, DONE])
    overlap.compare(a.pk)
    overlap.compare(b.pk)
    pairs = list(Agreement.objects.order_by("step_a__index").values_list("agree", flat=True))
    assert pairs == [False, True]  # the click disagrees, finishing agrees; compared once
    report = scorecards.tasks(project.pk)
    assert report == [{"task": task.pk, "external_id": "t1", "compared_steps": 2,
                       "agreed_steps": 1, "agreement": 0.5}]  # fmt: skip


def test_exports_keep_good_annotators_work_and_what_they_corroborate(honeypot, project, people):
    ann, bob, cal = people["ann"], people["bob"], people["cal"]
    for who, decisions in (
        (ann, [(Decision.CORRECTED, RIGHT), (Decision.ACCEPTED, DONE)]),
        (bob, [(Decision.ACCEPTED, WRONG), (Decision.ACCEPTED, DONE)]),
    ):
        run = worked(honeypot.task, who, decisions, [WRONG, DONE])
        HoneypotRun.objects.create(episode=run, honeypot=honeypot)
        checks.check_quality(run.pk)  # fmt: skip
    tasks = [Task.objects.create(project=project, external_id=f"t{i}", instruction="x")
             for i in range(3)]  # fmt: skip
    a0 = worked(tasks[0], ann, ACCEPT_RIGHT)
    b0 = worked(tasks[0], bob, ACCEPT_RIGHT)  # agrees with ann: corroborated
    a1 = worked(tasks[1], ann, [(Decision.CORRECTED, RIGHT), (Decision.ACCEPTED, DONE)],
                [WRONG, DONE])  # fmt: skip
    b1 = worked(tasks[1], bob, [(Decision.ACCEPTED, WRONG), (Decision.ACCEPTED, DONE)],
                [WRONG, DONE])  # fmt: skip
    c2 = worked(tasks[2], cal, [(Decision.CORRECTED, OFF), (Decision.ACCEPTED, DONE)])
    b2 = worked(tasks[2], bob, ACCEPT_RIGHT)  # agrees with nobody who passes
    for episode in (a0, b0, a1, b1, c2, b2):
        checks.check_quality(episode.pk)
    kept = set(
        episodes_for(Filters(project_id=project.pk, min_gold_accuracy=0.8), "sft").values_list(
            "pk", flat=True
        )
    )
    assert kept == {a0.pk, a1.pk, b0.pk}
    by_agreement = Filters(project_id=project.pk, min_agreement=0.7)
    # ann agreed 3 of 4 step pairs (with bob), bob 3 of 6, cal 1 of 2.
    assert set(episodes_for(by_agreement, "sft").values_list("pk", flat=True)) == {a0.pk, a1.pk}


def test_bad_quality_input_is_refused_and_nothing_is_stored(honeypot, project, people,
                                                            client_for):  # fmt: skip
    manager = client_for(people["mona"])
    before = Honeypot.objects.get(pk=honeypot.pk).decoys
    source = honeypot.gold_episode
    off_screen = {"1": {"thought": "x", "action": {"type": "click", "point": [5000, 10]}}}
    answer = manager.put(f"/api/episodes/{source.pk}/honeypot/", {"decoys": off_screen},
                         format="json")  # fmt: skip
    assert answer.status_code == 400 and "outside" in answer.json()["error"]["message"]
    not_gold = {"7": {"thought": "x", "action": RIGHT}}
    answer = manager.put(f"/api/episodes/{source.pk}/honeypot/", {"decoys": not_gold},
                         format="json")  # fmt: skip
    assert "only a gold step" in answer.json()["error"]["message"]
    assert Honeypot.objects.get(pk=honeypot.pk).decoys == before

    # A gold region outside the screen, and an empty right-answer set.
    stored = list(GoldStep.objects.values_list("step_id", "answers"))
    outside = [{"step": 1, "answers": [{"type": "click", "region": [1200, 700, 1400, 900]}]}]
    for steps, says in (
        (outside, "is not a box on the 1280x800 screen"),
        ([{"step": 1, "answers": []}], "at least one right answer"),
    ):
        answer = manager.put(f"/api/episodes/{source.pk}/gold/", {"steps": steps}, format="json")
        assert answer.status_code == 400 and says in answer.json()["error"]["message"]
    assert list(GoldStep.objects.values_list("step_id", "answers")) == stored

    # An overlap larger than the project's annotators (4) could never be met.
    answer = manager.patch(f"/api/projects/{project.pk}/", {"overlap": 5, "honeypot_rate": 0.1},
                           format="json")  # fmt: skip
    assert answer.status_code == 400 and "has 4" in str(answer.json())
    project.refresh_from_db()
    assert (project.overlap, project.honeypot_rate) == (1, 0.2)
    answer = manager.patch(f"/api/projects/{project.pk}/", {"honeypot_rate": 0.9}, format="json")
    assert answer.status_code == 400
    # An annotator reads none of the quality settings, and no honeypot endpoint.
    ann = client_for(people["ann"])
    assert "honeypot_rate" not in ann.get(f"/api/projects/{project.pk}/").json()
    assert ann.get(f"/api/projects/{project.pk}/honeypots/").status_code == 403


def test_raising_overlap_puts_submitted_tasks_back_for_more_annotators(project, people,
                                                                     client_for):  # fmt: skip
    task = Task.objects.create(project=project, external_id="t1", instruction="x")
    worked(task, people["ann"], ACCEPT_RIGHT)
    Task.objects.filter(pk=task.pk).update(status=TaskStatus.SUBMITTED)
    answer = client_for(people["mona"]).patch(
        f"/api/projects/{project.pk}/", {"overlap": 2}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert Task.objects.get(pk=task.pk).status == TaskStatus.QUEUED
    with pytest.raises(queue.NoTaskAvailable):
        claim(people["ann"], project)
    assert claim(people["bob"], project).pk == task.pk


def test_the_annotators_own_scorecard_counts_gold_only_up_to_yesterday(honeypot, people,
                                                                       client_for):  # fmt: skip
    run = worked(honeypot.task, people["ann"], [(Decision.CORRECTED, RIGHT),
                 (Decision.ACCEPTED, DONE)], [WRONG, DONE])  # fmt: skip
    HoneypotRun.objects.create(episode=run, honeypot=honeypot)
    checks.check_quality(run.pk)
    url = f"/api/projects/{honeypot.task.project_id}/scorecards/"
    mine = client_for(people["ann"]).get(url + "mine/").json()["scorecard"]
    assert (mine["episodes"], mine["gold_steps"]) == (1, 0)  # today's run is not counted yet
    everyone = client_for(people["mona"]).get(url).json()["scorecards"]
    assert [(c["annotator"], c["gold_steps"], c["gold_accuracy"]) for c in everyone] == [
        ("ann", 2, 1.0), ("gina", 0, None)]  # fmt: skip
    GoldVerdict.objects.update(at=timezone.now() - timedelta(days=1))
    mine = client_for(people["ann"]).get(url + "mine/").json()["scorecard"]
    assert (mine["gold_steps"], mine["gold_accuracy"]) == (2, 1.0)

    # Overlap is a check too: a comparison counts from tomorrow, like gold.
    task = Task.objects.create(project=honeypot.task.project, external_id="o1", instruction="x")
    a, b = worked(task, people["ann"], ACCEPT_RIGHT), worked(task, people["bob"], ACCEPT_RIGHT)
    Agreement.objects.create(
        task=task, step_a=a.steps.get(index=1), step_b=b.steps.get(index=1),
        annotator_a=people["ann"], annotator_b=people["bob"], agree=True, at=timezone.now(),
    )  # fmt: skip
    mine = client_for(people["ann"]).get(url + "mine/").json()["scorecard"]
    assert mine["compared_steps"] == 0
    Agreement.objects.update(at=timezone.now() - timedelta(days=1))
    mine = client_for(people["ann"]).get(url + "mine/").json()["scorecard"]
    assert (mine["compared_steps"], mine["agreed_steps"]) == (1, 1)
    # No period narrows it to one episode's end.
    around = {"ended_from": run.ended_at.isoformat(), "ended_until": timezone.now().isoformat()}
    refused = client_for(people["ann"]).get(url + "mine/", around)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_period"
