"""The demonstration API (take over, hand back, finish, the control stream, thoughts) refuses what
it must, with a clear error, and stores nothing then. Database rows only: no desktop runs."""

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation import jobs
from annotation.datasets import exports
from annotation.datasets.pairs import THOUGHTS_NOT_APPROVED, iter_samples
from annotation.datasets.records import Filters, Tally
from annotation.episodes import demonstrations, loop, thoughts
from annotation.models import (
    DatasetExport,
    Decision,
    Demonstration,
    Episode,
    Proposal,
    Step,
    StepRevision,
    Task,
)
from backend.accounts.roles import Role
from model_serving.demo_endpoint import DemoEndpoint, make_server
from tests.support.fake_model_server import Reply, serving
from tests.support.pngs import solid_png
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate, Recording, StreamToken
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(project, make_user, settings, tmp_path):
    """An interactive episode on a leased desktop row, its step 1 open with a proposal."""
    settings.MEDIA_ROOT = tmp_path
    ann = make_user("ann", project, Role.ANNOTATOR)
    template = DesktopTemplate.objects.create(name="rows", min_ready=0)
    now = timezone.now()
    desktop = Desktop.objects.create(
        template=template, host="host-a", provider="local", status=DesktopStatus.LEASED,
        display=150, vnc_socket="/nowhere/vnc.sock", width=1280, height=800, leased_by=ann,
        lease_ref="task:1", leased_at=now, lease_expires_at=now + timedelta(minutes=2),
    )  # fmt: skip
    task = Task.objects.create(project=project, external_id="t1", instruction="Do it")
    episode = Episode.objects.create(
        task=task, annotator=ann, desktop=desktop, desktop_generation=desktop.generation
    )
    step = Step.objects.create(
        episode=episode, index=1, observation=store_screenshot(solid_png(1280, 800))
    )
    Proposal.objects.create(
        step=step, raw_text="…", thought="Click it.", action={"type": "click", "point": [5, 6]}
    )
    return episode


def stored(episode: Episode) -> tuple:
    """What the refusals must leave as it was."""
    return (
        Demonstration.objects.filter(episode=episode).count(),
        Recording.objects.count(),
        StreamToken.objects.count(),
        list(Step.objects.filter(episode=episode).values_list("index", "decision")),
        StepRevision.objects.count(),
    )


def test_only_the_episode_s_annotator_takes_over_and_only_an_open_step(
    running, client_for, make_user
):
    before = stored(running)
    manager = make_user("maria", running.task.project, Role.MANAGER)
    answer = client_for(manager).post(f"/api/episodes/{running.pk}/take-over/")
    assert answer.status_code == 403, answer.content
    assert answer.json()["error"]["code"] == "not_the_annotator"
    answer = client_for(running.annotator).post(f"/api/episodes/{running.pk}/hand-back/")
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "demonstration_refused")
    assert "not driving" in answer.json()["error"]["message"]
    answer = client_for(running.annotator).post(f"/api/episodes/{running.pk}/control-stream/")
    assert answer.status_code == 409 and "Take over first" in answer.json()["error"]["message"]
    assert stored(running) == before


def test_a_take_over_keeps_the_proposal_on_screen_and_stops_decisions_until_handed_back(
    running, client_for
):
    client = client_for(running.annotator)
    answer = client.post(f"/api/episodes/{running.pk}/take-over/")
    assert answer.status_code == 201, answer.content
    assert answer.json() == {"from_step": 1, "over_proposal": 0, "ended": False}
    again = client.post(f"/api/episodes/{running.pk}/take-over/")
    assert again.status_code == 409 and "already" in again.json()["error"]["message"]
    with pytest.raises(loop.EpisodeError, match="hand back"):
        loop.decide(running.pk, running.annotator, 1, Decision.ACCEPTED, proposal_rank=0)
    stream = client.post(f"/api/episodes/{running.pk}/control-stream/")
    assert stream.status_code == 201 and stream.json()["view_only"] is False
    assert stream.json()["last_refusal"] is None
    # The control token leads to the recording and nowhere for anyone else.
    token = StreamToken.objects.get(view_only=False)
    assert token.recording == Demonstration.objects.get().recording
    assert token.user == running.annotator

    handed = client.post(f"/api/episodes/{running.pk}/hand-back/")
    assert handed.status_code == 202 and handed.json()["ended"] is True
    recording = Recording.objects.get()
    assert recording.ended_at is not None  # the gate passes nothing more from now on
    assert not demonstrations.is_driving(running.pk)


def test_a_demonstration_has_no_model_to_hand_back_to(running, client_for):
    Episode.objects.filter(pk=running.pk).update(demonstration=True)
    client = client_for(running.annotator)
    assert client.post(f"/api/episodes/{running.pk}/take-over/").status_code == 201
    answer = client.post(f"/api/episodes/{running.pk}/hand-back/")
    assert answer.status_code == 409 and "finish it" in answer.json()["error"]["message"]
    assert Recording.objects.get().ended_at is None


def test_thoughts_are_written_only_on_demonstrated_steps_and_never_empty(running, client_for):
    client = client_for(running.annotator)
    url = f"/api/episodes/{running.pk}/steps/1/thought/"
    before = stored(running)
    answer = client.put(url, {"thought": "Because."}, format="json")
    assert (
        answer.status_code == 400 and "not a demonstrated step" in answer.json()["error"]["message"]
    )
    Step.objects.filter(episode=running, index=1).update(
        decision=Decision.DEMONSTRATED,
        final_action={"type": "click", "point": [5, 6]},
        decided_by=running.annotator,
        decided_at=timezone.now(),
    )
    for body in ({"thought": "   "}, {"thought": "x" * 4001}, {}):
        assert client.put(url, body, format="json").status_code == 400
    assert stored(running)[4] == before[4]  # no revision written

    answer = client.put(url, {"thought": " Open the menu first. "}, format="json")
    assert answer.json() == {"thought": "Open the menu first.", "drafted_by": "", "approved": True}
    assert client.put(url, {"thought": "Open the menu first."}, format="json").status_code == 200
    assert StepRevision.objects.count() == 1  # the same thought again is no new revision
    revision = StepRevision.objects.get()
    assert (revision.decision, revision.final_action, revision.author) == (
        Decision.DEMONSTRATED,
        {"type": "click", "point": [5, 6]},
        running.annotator,
    )


@pytest.fixture
def demonstrated(running):
    """The running episode's first step demonstrated (a click), with no thought yet."""
    Step.objects.filter(episode=running, index=1).update(
        decision=Decision.DEMONSTRATED,
        final_action={"type": "click", "point": [640, 400]},
        decided_by=running.annotator,
        decided_at=timezone.now(),
    )
    return running


def test_the_demo_endpoint_drafts_thoughts_that_stay_drafts_until_the_person_approves_them(
    demonstrated, client_for
):
    server = make_server(DemoEndpoint("ui-tars-demo"), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    demonstrated.task.project.model_settings = {"base_url": base, "model": "ui-tars-demo"}
    demonstrated.task.project.save(update_fields=["model_settings"])
    client = client_for(demonstrated.annotator)
    try:
        answer = client.post(f"/api/episodes/{demonstrated.pk}/draft-thoughts/")
        assert answer.status_code == 202 and answer.json() == {"steps": 1}
        assert jobs.draft_thoughts(demonstrated.pk, demonstrated.annotator.pk) == 1
    finally:
        server.shutdown()
    (step,) = client.get(f"/api/episodes/{demonstrated.pk}/").json()["steps"]
    draft = step["revisions"][-1]
    assert draft["drafted_by"] == "ui-tars-demo"
    assert draft["final_thought"].startswith("[Demo endpoint: scripted answer, not a model]")
    filters = Filters(project_id=demonstrated.task.project_id, require_approved_thoughts=True)
    Episode.objects.filter(pk=demonstrated.pk).update(ended_at=timezone.now(), outcome="finished")
    assert list(iter_samples(filters, "sft")) == []  # a draft is no person's thought
    # Nothing left to draft: asking again queues nothing.
    assert client.post(f"/api/episodes/{demonstrated.pk}/draft-thoughts/").json() == {"steps": 0}

    url = f"/api/episodes/{demonstrated.pk}/steps/1/thought/"
    approved = client.put(url, {"thought": draft["final_thought"]}, format="json").json()
    assert approved["approved"] is True and approved["drafted_by"] == ""
    (sample,) = iter_samples(filters, "sft")
    assert sample.completion.thought == draft["final_thought"]


def test_a_draft_that_comes_after_the_persons_thought_does_not_replace_it(demonstrated):
    """The person wrote the thought while the model was still drafting it."""
    ann = demonstrated.annotator
    thoughts.write(demonstrated.pk, ann, 1, "The Save button is there.")
    late = thoughts.write(demonstrated.pk, ann, 1, "Click.", drafted_by="ui-tars-demo")
    assert (late.text, late.drafted_by) == ("The Save button is there.", "")
    step = Step.objects.get(episode=demonstrated, index=1)
    assert thoughts.thought_of(step).approved
    assert [r.final_thought for r in step.revisions.order_by("number")] == [
        "The Save button is there."
    ]


def test_exports_leave_out_demonstrations_without_a_persons_thoughts_unless_told_not_to(
    demonstrated, client_for, make_user
):
    Episode.objects.filter(pk=demonstrated.pk).update(ended_at=timezone.now(), outcome="finished")
    project = demonstrated.task.project
    engineer = client_for(make_user("erin", project, Role.ENGINEER))

    def asked(filters: dict) -> dict:
        body = {"project": project.pk, "kind": "sft", "format": "trl", "filters": filters}
        created = engineer.post("/api/exports/", body, format="json")
        assert created.status_code == 201, created.json()
        return exports.export_filters(DatasetExport.objects.get(pk=created.json()["id"]))[0]

    by_default = asked({})
    assert by_default.require_approved_thoughts is True
    tally = Tally()
    assert list(iter_samples(by_default, "sft", tally=tally)) == []
    assert tally.skipped == {THOUGHTS_NOT_APPROVED: 1}
    turned_off = asked({"require_approved_thoughts": False})
    assert turned_off.require_approved_thoughts is False
    (sample,) = iter_samples(turned_off, "sft")  # the engineer's own choice
    assert (sample.kind, sample.completion.thought) == ("demonstrated", "")


def test_a_model_asked_for_a_thought_sees_the_person_s_action_and_the_screen(demonstrated):
    with serving("ui-tars-1.5-7b") as model:
        model.script(Reply.text("Thought: The Save button is there, so I click it.\nAction: x"))
        demonstrated.task.project.model_settings = {
            "base_url": model.base_url, "model": "ui-tars-1.5-7b", "retries": 0,
        }  # fmt: skip
        demonstrated.task.project.save(update_fields=["model_settings"])
        assert jobs.draft_thoughts(demonstrated.pk, demonstrated.annotator.pk) == 1
        (request,) = model.chat_requests
    asked = request.body["messages"][-1]["content"][0]["text"]
    assert asked.startswith("A person took the action below") and "click(start_box=" in asked
    assert any(
        part.get("type") == "image_url"
        for message in request.body["messages"]
        for part in message["content"]
    )
    revision = StepRevision.objects.get()
    assert revision.final_thought == "The Save button is there, so I click it."
    assert revision.drafted_by == "ui-tars-1.5-7b"
