"""The rules of the live loop's decisions and proposals, on the database (no desktop runs).

Jobs the loop queues are sent after commit; these tests run inside a transaction that is
rolled back, so nothing is sent and the rules are seen on their own.
"""

import io
from datetime import timedelta

import pytest
from django.utils import timezone
from PIL import Image

from annotation import jobs
from annotation.datasets import pairs
from annotation.episodes import loop as episodes
from annotation.episodes import observations, proposals
from annotation.episodes.leases import end_episode, heartbeat
from annotation.episodes.ownership import EpisodeError
from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    Project,
    Proposal,
    Step,
    Task,
    TaskStatus,
)
from backend.accounts.roles import Role
from backend.celery import app as celery_app
from model_serving.proposers.base import Candidate, ProposalResult
from tests.conftest import MODEL_CLICK
from tests.support.at_once import at_once
from tests.support.fake_model_server import Reply, serving
from tests.support.pngs import solid_png
from vm_pool.actions import Action, ActionType, Point, ScreenSize
from vm_pool.desktop import Observation
from vm_pool.models import Desktop, DesktopStatus
from vm_pool.screen.screenshots import store_screenshot

CLICK = MODEL_CLICK
SCREEN = ScreenSize(1280, 800)


@pytest.fixture
def loop(open_episode):
    """The open episode, its step with a valid click (0), garbage (1) and a "finished" (2)."""
    episode, step, ann = open_episode
    Proposal.objects.create(step=step, rank=1, raw_text="garbage", invalid_reason="no Action: line")
    Proposal.objects.create(
        step=step, rank=2, raw_text="…", thought="Done.", action={"type": "finished", "content": ""}
    )
    return episode, step, ann


def undecided(step: Step) -> bool:
    step.refresh_from_db()
    return step.decided_at is None and step.decision == ""


@pytest.mark.django_db
def test_an_invalid_proposal_cannot_be_accepted_so_it_is_never_executed(loop):
    episode, step, ann = loop
    for decision in (Decision.ACCEPTED, Decision.ERROR_KEPT):
        with pytest.raises(episodes.InvalidDecision, match="invalid"):
            episodes.decide(episode.pk, ann, 1, decision, proposal_rank=1)
    assert undecided(step)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"type": "click", "point": [1280, 10]}, "outside"),
        ({"type": "press_home"}, "android"),
        ({"type": "hotkey", "keys": ["hyperdrive"]}, "key"),
        ({"type": "teleport"}, "teleport"),
    ],
)
def test_a_correction_that_is_not_a_valid_action_here_is_refused(loop, action, message):
    episode, step, ann = loop
    with pytest.raises(episodes.InvalidDecision, match=message):
        episodes.decide(episode.pk, ann, 1, Decision.CORRECTED, thought="x", action=action)
    assert undecided(step)


@pytest.mark.django_db
def test_a_wrong_finished_cannot_be_kept_to_reflect_on(loop):
    episode, step, ann = loop
    with pytest.raises(episodes.InvalidDecision, match="cannot be kept"):
        episodes.decide(episode.pk, ann, 1, Decision.ERROR_KEPT, proposal_rank=2)
    assert undecided(step)


@pytest.mark.django_db
def test_only_the_episodes_annotator_decides(loop, make_user, project):
    episode, step, _ = loop
    other = make_user("otto", project, Role.ANNOTATOR)
    with pytest.raises(EpisodeError):
        episodes.decide(episode.pk, other, 1, Decision.ACCEPTED, proposal_rank=0)
    assert undecided(step)


@pytest.mark.django_db
def test_duplicate_is_acknowledged_and_a_different_second_decision_is_stale(loop):
    episode, step, ann = loop
    first = episodes.decide(episode.pk, ann, 1, Decision.ACCEPTED, proposal_rank=0)
    again = episodes.decide(episode.pk, ann, 1, Decision.ACCEPTED, proposal_rank=0)
    assert (first.duplicate, again.duplicate) == (False, True)
    with pytest.raises(episodes.StaleDecision, match="already decided"):
        episodes.decide(episode.pk, ann, 1, Decision.CORRECTED, thought="no", action=CLICK)
    with pytest.raises(episodes.StaleDecision):
        episodes.decide(episode.pk, ann, 2, Decision.ACCEPTED, proposal_rank=0)
    step.refresh_from_db()
    assert (step.decision, step.final_action, step.chosen_proposal.rank) == ("accepted", CLICK, 0)


@pytest.mark.django_db
def test_a_newer_screen_supersedes_the_proposals_made_for_the_older_one(loop):
    episode, step, ann = loop
    older = step.observation_id
    assert observations.reobserve(step.pk, solid_png(1280, 800, (0, 90, 0)), 420.0)
    step.refresh_from_db()
    assert (step.reobserved, step.settle_ms) == (1, 420) and step.observation_id != older
    assert list(step.proposals.values_list("superseded", flat=True)) == [True, True, True]
    with pytest.raises(episodes.StaleDecision, match="screen that has changed"):
        episodes.decide(episode.pk, ann, 1, Decision.ACCEPTED, proposal_rank=0)
    assert undecided(step)
    # Once decided, a change on the screen is the action's: the step keeps its observation.
    episodes.decide(episode.pk, ann, 1, Decision.CORRECTED, thought="Open it.", action=CLICK)
    assert not observations.reobserve(step.pk, solid_png(1280, 800, (90, 0, 0)), 10.0)
    assert Step.objects.get(pk=step.pk).observation_id == step.observation_id


@pytest.mark.django_db
def test_a_second_job_for_a_step_being_executed_leaves_it_alone(loop):
    episode, step, ann = loop
    episodes.decide(episode.pk, ann, 1, Decision.ACCEPTED, proposal_rank=0)
    taken = timezone.now()  # a job took the step and is typing, say
    Step.objects.filter(pk=step.pk).update(executing_since=taken)

    episodes.execute_step(step.pk)  # a retried job: it must not run the action again
    step.refresh_from_db()
    assert step.executing_since == taken
    assert not episode.steps.filter(index=2).exists()
    assert Episode.objects.get(pk=episode.pk).ended_at is None
    # A reconnecting client does not queue it again either while that job may still run, long
    # after the step looks stalled.
    assert not episodes.resume_if_stalled(episode.pk, now=taken + timedelta(seconds=45))


@pytest.mark.django_db
def test_a_step_whose_job_died_mid_execution_is_queued_again_after_the_expiry(loop):
    episode, step, ann = loop
    episodes.decide(episode.pk, ann, 1, Decision.ACCEPTED, proposal_rank=0)
    taken = timezone.now()
    Step.objects.filter(pk=step.pk).update(executing_since=taken)
    later = taken + episodes.EXECUTION_EXPIRES + timedelta(seconds=1)
    assert episodes.resume_if_stalled(episode.pk, now=later)
    # A decided step that no job took is queued again once it has stalled, and not before.
    Step.objects.filter(pk=step.pk).update(executing_since=None)
    assert not episodes.resume_if_stalled(episode.pk, now=taken)
    assert episodes.resume_if_stalled(episode.pk, now=taken + episodes.STALL_AFTER * 2)


@pytest.mark.django_db
def test_deciding_finished_ends_the_episode_submits_the_task_and_releases_the_desktop(loop):
    episode, _, ann = loop
    done = {"type": "finished", "content": "the folder is open"}
    receipt = episodes.decide(episode.pk, ann, 1, Decision.CORRECTED, thought="Done.", action=done)
    assert receipt.ends_episode
    episode.refresh_from_db()
    assert episode.outcome == EpisodeOutcome.FINISHED
    assert Task.objects.get(pk=episode.task_id).status == TaskStatus.SUBMITTED
    assert Desktop.objects.get(pk=episode.desktop_id).status == DesktopStatus.RESETTING
    assert not episodes.end_episode(episode.pk, EpisodeOutcome.ABANDONED, "twice")  # once only


@pytest.mark.django_db
def test_abandoning_gives_the_task_back_to_the_pool(loop):
    episode, _, _ = loop
    assert episodes.end_episode(episode.pk, EpisodeOutcome.ABANDONED, "abandoned by the annotator")
    task = Task.objects.get(pk=episode.task_id)
    assert (task.status, task.assignee) == (TaskStatus.QUEUED, None)


@pytest.mark.django_db
def test_a_dead_model_is_recorded_and_the_annotator_writes_the_step(loop):
    episode, step, ann = loop
    Proposal.objects.filter(step=step).delete()
    Project.objects.filter(pk=episode.task.project_id).update(
        model_settings={"base_url": "http://127.0.0.1:9/v1", "model": "ui-tars", "retries": 0}
    )
    jobs.propose_step(step.pk)

    unavailable = Proposal.objects.get(step=step)
    assert unavailable.action is None and unavailable.invalid_reason.startswith("model unavailable")
    receipt = episodes.decide(
        episode.pk, ann, 1, Decision.CORRECTED, thought="Myself.", action=CLICK
    )
    assert not receipt.duplicate
    step.refresh_from_db()
    assert (step.decision, step.chosen_proposal, step.final_action) == ("corrected", None, CLICK)


@pytest.mark.django_db
def test_a_streamed_model_answer_is_stored_in_screen_pixels_and_garbage_is_invalid(loop):
    episode, step, ann = loop
    Proposal.objects.filter(step=step).delete()
    with serving(model="ui-tars-1.5-7b") as server:
        # 1280×800 is smart-resized to 1288×812 for UI-TARS-1.5: (644, 406) there is (640, 400).
        server.script(
            Reply.text("Thought: Open the archive.\nAction: click(start_box='(644,406)')")
        )
        Project.objects.filter(pk=episode.task.project_id).update(
            model_settings={"base_url": server.base_url, "model": "ui-tars-1.5-7b"}
        )
        jobs.propose_step(step.pk)
        server.script(Reply.text("I think I should click somewhere."))
        Step.objects.create(
            episode=episode, index=2, observation=store_screenshot(solid_png(1280, 800, (9, 9, 9)))
        )
        jobs.propose_step(Step.objects.get(episode=episode, index=2).pk)

    good = Proposal.objects.get(step=step)
    assert good.action == {"type": "click", "point": [640, 400]}
    assert (good.model_name, good.thought) == ("ui-tars-1.5-7b", "Open the archive.")
    assert good.latency_ms is not None and good.completion_tokens
    bad = Proposal.objects.get(step__index=2)
    assert bad.action is None and bad.invalid_reason


@pytest.mark.django_db
def test_a_socket_heartbeat_keeps_both_the_task_and_the_desktop_lease(loop):
    episode, _, ann = loop
    task = Task.objects.get(pk=episode.task_id)
    soon = timezone.now() + timedelta(seconds=5)
    Task.objects.filter(pk=task.pk).update(lease_expires_at=soon)
    heartbeat(episode.pk, ann)
    later = timezone.now() + timedelta(seconds=60)
    assert Task.objects.get(pk=task.pk).lease_expires_at > later
    assert Desktop.objects.get(pk=episode.desktop_id).lease_expires_at > later
    episodes.end_episode(episode.pk, EpisodeOutcome.ABANDONED, "done")
    with pytest.raises(EpisodeError, match="ended"):
        heartbeat(episode.pk, ann)


def _answer(text: str = "Thought: open it.") -> ProposalResult:
    click = Action(ActionType.CLICK, Point(10, 10))
    return ProposalResult((Candidate(text, "open it.", click),), "m", "m")


@pytest.mark.django_db
def test_a_step_is_reobserved_at_most_a_bounded_number_of_times(loop):
    episode, step, ann = loop
    for turn in range(observations.MAX_REOBSERVED + 2):
        observations.reobserve(step.pk, solid_png(640, 400, (turn * 40, 10, 10)), 5.0)
    step.refresh_from_db()
    assert step.reobserved == observations.MAX_REOBSERVED
    last = step.observation_id
    assert not observations.reobserve(step.pk, solid_png(640, 400, (1, 2, 3)), 5.0)
    assert Step.objects.get(pk=step.pk).observation_id == last


@pytest.mark.django_db
def test_one_proposal_at_most_is_in_flight_for_a_step(
    open_episode, monkeypatch, django_capture_on_commit_callbacks
):
    """A screen replaced while the model is still answering asks nothing more; the answer, once
    it comes for the older screen, is kept as superseded and asks for the newer one."""
    episode, step, ann = open_episode
    Proposal.objects.filter(step=step).delete()  # the model has not answered the first screen
    sent: list[tuple[str, list]] = []
    monkeypatch.setattr(
        celery_app, "send_task", lambda name, args, queue: sent.append((name, args))
    )
    first = step.observation_id
    with django_capture_on_commit_callbacks(execute=True):
        assert observations.reobserve(step.pk, solid_png(640, 400, (9, 9, 9)), 5.0)
    assert ("annotation.jobs.propose_step", [step.pk]) not in sent
    with django_capture_on_commit_callbacks(execute=True):
        proposals.record_proposals(step.pk, _answer(), observation=first)
    assert sent.count(("annotation.jobs.propose_step", [step.pk])) == 1
    assert list(step.proposals.values_list("superseded", flat=True)) == [True]
    # Answered for the current screen: the next replacement asks at once.
    with django_capture_on_commit_callbacks(execute=True):
        proposals.record_proposals(
            step.pk, _answer(), observation=Step.objects.get(pk=step.pk).observation_id
        )
        assert observations.reobserve(step.pk, solid_png(640, 400, (7, 7, 7)), 5.0)
    assert sent.count(("annotation.jobs.propose_step", [step.pk])) == 2


@pytest.mark.django_db
def test_an_answer_that_comes_after_the_decision_is_kept_but_offered_to_no_one(
    open_episode, monkeypatch, django_capture_on_commit_callbacks
):
    """The annotator corrected the step while the model was still answering: the answer, no
    one having seen it, is stored superseded, asks for nothing, and is no pair's rejected
    side."""
    episode, step, ann = open_episode
    Proposal.objects.filter(step=step).delete()  # the model has not answered yet
    sent: list[tuple[str, list]] = []
    monkeypatch.setattr(
        celery_app, "send_task", lambda name, args, queue: sent.append((name, args))
    )
    typed = {"type": "type", "content": "Archive"}
    episodes.decide(episode.pk, ann, 1, Decision.CORRECTED, thought="Type it.", action=typed)
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        proposals.record_proposals(step.pk, _answer(), observation=step.observation_id)
        proposals.record_model_unavailable(step.pk, "timed out", observation=step.observation_id)
    assert list(step.proposals.values_list("superseded", flat=True)) == [True, True]
    assert sent == []
    Episode.objects.filter(pk=episode.pk).update(ended_at=timezone.now(), outcome="finished")
    filters = pairs.Filters(project_id=episode.task.project_id)
    assert list(pairs.iter_samples(filters, "dpo")) == []
    (sample,) = pairs.iter_samples(filters, "sft")
    assert sample.completion.action_json == typed


@pytest.mark.django_db(transaction=True)
def test_two_answers_stored_at_once_never_take_the_same_rank(open_episode):
    episode, step, ann = open_episode
    before = step.proposals.count()
    at_once(lambda: proposals.record_proposals(step.pk, _answer()), 6)
    ranks = list(step.proposals.values_list("rank", flat=True))
    assert sorted(ranks) == list(range(before + 6))


@pytest.mark.django_db
def test_a_step_whose_action_left_its_screen_as_it_was_is_flagged_and_an_export_can_drop_it(
    open_episode, django_capture_on_commit_callbacks
):
    episode, step, ann = open_episode
    typed = {"type": "type", "content": "Hello from Tandem"}
    waited = {"type": "wait"}
    click = {"type": "click", "point": [640, 400]}
    same, other = solid_png(1280, 800), solid_png(1280, 800, (200, 90, 40))
    buffer = io.BytesIO()
    Image.open(io.BytesIO(same)).save(buffer, "PNG", compress_level=1)
    reencoded = buffer.getvalue()  # the same picture in other bytes
    assert reencoded != same
    with django_capture_on_commit_callbacks(execute=True):
        episodes.decide(episode.pk, ann, 1, Decision.CORRECTED, thought="Type it.", action=typed)
        # The screen after it is the screen it was decided on: the keys went nowhere. The
        # host passes the step it ran (``after``), as ``execute_step`` does.
        ran = Step.objects.get(pk=step.pk)
        second = observations.store(episode.pk, 2, Observation(same, SCREEN), after=ran)
        episodes.decide(episode.pk, ann, 2, Decision.CORRECTED, thought="Wait.", action=waited)
        third = observations.store(episode.pk, 3, Observation(same, SCREEN))
        episodes.decide(episode.pk, ann, 3, Decision.CORRECTED, thought="Click.", action=click)
        fourth = observations.store(episode.pk, 4, Observation(reencoded, SCREEN))
        episodes.decide(episode.pk, ann, 4, Decision.CORRECTED, thought="Click.", action=click)
        ran = Step.objects.get(pk=fourth.pk)
        observations.store(episode.pk, 5, Observation(other, SCREEN), after=ran)
    assert second is not None and third is not None and fourth is not None
    flagged = dict(Step.objects.filter(episode=episode).values_list("index", "no_visible_effect"))
    # Waiting changes nothing by design; the last click changed the screen.
    assert flagged == {1: True, 2: False, 3: True, 4: False, 5: False}

    end_episode(episode.pk, EpisodeOutcome.FINISHED, "done")
    kept = pairs.Filters(project_id=episode.task.project_id)
    dropped = pairs.Filters(project_id=episode.task.project_id, drop_no_visible_effect=True)
    tally = pairs.Tally()
    assert [s.step_index for s in pairs.iter_samples(kept, "sft")] == [1, 2, 3, 4]
    assert [s.step_index for s in pairs.iter_samples(dropped, "sft", tally=tally)] == [2, 4]
    assert tally.skipped[pairs.NO_VISIBLE_EFFECT] == 2
