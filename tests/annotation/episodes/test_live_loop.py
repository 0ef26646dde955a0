"""The live loop end to end: a real ASGI server, a real Celery worker owning a real desktop,
the baseline proposer, and a WebSocket client deciding every kind of step."""

import os
import signal

import httpx
import pytest
from django.test import Client

from annotation.models import Decision, Episode, EpisodeOutcome, Project, Step, Task, TaskStatus
from backend.accounts.roles import Role
from tests.support.live import CSRF, TERMINAL, Socket, asgi, worker
from tests.support.services import free_port
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_an_episode_with_every_decision_survives_a_server_restart(host, make_user, project):
    template = DesktopTemplate.objects.create(name="loop", width=1280, height=800)
    Project.objects.filter(pk=project.pk).update(environment_template="loop")
    ann = make_user("ann", project, Role.ANNOTATOR)
    task = Task.objects.create(
        project=project,
        external_id="loop-1",
        instruction="Open the Archive folder, then the Reports folder",
        setup=[{"type": "launch", "parameters": {"command": TERMINAL}}],
        max_steps=10,
    )
    desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    client = Client()
    client.force_login(ann)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    port = free_port()
    server = f"127.0.0.1:{port}"
    sent: list[tuple[int, str, dict]] = []

    with worker(host):
        with asgi(host, port) as web:
            started = httpx.post(
                f"http://{server}/api/episodes/start/",
                json={"project": project.pk},
                headers={"Cookie": f"{cookie}; csrftoken={CSRF}", "X-CSRFToken": CSRF},
            )
            assert started.status_code == 201, started.text
            episode_id = started.json()["episode"]
            ws = Socket(server, episode_id, cookie)
            assert ws.next("state")["task"]["id"] == task.pk

            # 1: accept the baseline's proposal.
            first = ws.next("proposal", step=1)["candidates"][0]
            assert first["model_name"] == "tandem-baseline" and first["action"] is not None
            ws.send(type="decide", step=1, decision="accepted", proposal=0)
            assert ws.next("decision_ack", step=1)["duplicate"] is False
            sent.append((1, Decision.ACCEPTED, first["action"]))

            # The lease is kept alive through the socket.
            ws.send(type="heartbeat")
            ws.next("heartbeat_ack")

            # 2: correct it with the annotator's own click.
            ws.next("proposal", step=2)
            click = {"type": "click", "point": [640, 400]}
            ws.send(
                type="decide",
                step=2,
                decision="corrected",
                thought="Focus the terminal.",
                action=click,
            )
            ws.next("decision_ack", step=2)
            sent.append((2, Decision.CORRECTED, click))
            # A retried message is acknowledged once more as a duplicate and changes nothing.
            ws.send(
                type="decide",
                step=2,
                decision="corrected",
                thought="Focus the terminal.",
                action=click,
            )
            assert ws.next("decision_ack", step=2)["duplicate"] is True
            # A decision for a step that is not open is refused.
            ws.send(
                type="decide", step=1, decision="corrected", thought="late", action={"type": "wait"}
            )
            assert ws.next("error", step=1)["code"] == "stale_decision"

            # 3: keep the model's (wrong) action on purpose.
            third = ws.next("proposal", step=3)["candidates"][0]
            assert third["action"]["type"] == "click", third  # the baseline's next (wrong) target
            ws.send(type="decide", step=3, decision="error_kept", proposal=0)
            ws.next("decision_ack", step=3)
            sent.append((3, Decision.ERROR_KEPT, third["action"]))
            # The web server is killed mid-episode; the worker carries on; a new server comes up.
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()

        with asgi(host, port):
            ws = Socket(server, episode_id, cookie)
            state = ws.next("state")
            assert [s["decision"] for s in state["steps"][:3]] == [
                "accepted",
                "corrected",
                "error_kept",
            ]
            if state["open_step"] != 4 or not state["steps"][3]["proposals"]:
                ws.next("proposal", step=4)

            # 4: the reflection — the annotator writes the step that fixes the error.
            reflection = {"type": "type", "content": "hello tandem\n"}
            ws.send(
                type="decide",
                step=4,
                decision="corrected",
                thought="The last action was wrong; type the text instead.",
                action=reflection,
            )
            ws.next("decision_ack", step=4)
            sent.append((4, Decision.CORRECTED, reflection))

            # 5: finish.
            ws.next("proposal", step=5)
            done = {"type": "finished", "content": ""}
            ws.send(type="decide", step=5, decision="corrected", thought="Done.", action=done)
            ws.next("decision_ack", step=5)
            assert ws.next("ended")["outcome"] == EpisodeOutcome.FINISHED
            sent.append((5, Decision.CORRECTED, done))
            ws.close()

    episode = Episode.objects.get(pk=episode_id)
    assert episode.outcome == EpisodeOutcome.FINISHED
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [(s.index, s.decision, s.final_action) for s in steps] == sent
    assert all(s.proposals.count() >= 1 for s in steps)
    assert all(s.decided_by_id == ann.pk for s in steps)
    assert Task.objects.get(pk=task.pk).status == TaskStatus.SUBMITTED
    assert Desktop.objects.get(pk=desktop.pk).status != DesktopStatus.LEASED
