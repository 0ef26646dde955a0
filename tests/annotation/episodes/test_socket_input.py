"""What an episode's socket does with input it must refuse: it answers with an ``error`` event
naming the problem, stays open, and stores nothing.

The consumers run in-process (``tests.support.sockets``) with the in-memory channel layer; the
episode and its open step are real rows (committed, since the consumer reads them from another
thread), and no desktop or worker is involved: a refused message never gets that far.
"""

import json
from typing import Any

import pytest

from annotation.episodes import loop as episodes
from annotation.episodes import messages as socket_messages
from annotation.models import Episode, Proposal, Review, Step, Task, TaskEvent
from backend.accounts.roles import Role
from tests.conftest import MODEL_CLICK
from tests.support.sockets import IN_MEMORY_LAYER, Socket, run, socket_of

pytestmark = pytest.mark.django_db(transaction=True)

CLICK = MODEL_CLICK
DECIDE = {
    "type": "decide",
    "step": 1,
    "decision": "corrected",
    "proposal": 0,
    "thought": "Open the folder.",
    "action": CLICK,
    "decision_ms": 1500,
}


@pytest.fixture
def episode(open_episode, settings) -> Episode:
    settings.CHANNEL_LAYERS = IN_MEMORY_LAYER
    return open_episode[0]


def stored(episode: Episode) -> list[Any]:
    """Everything a message to the socket could change."""
    task = Task.objects.get(pk=episode.task_id)
    row = Episode.objects.get(pk=episode.pk)
    steps = list(
        Step.objects.filter(episode=episode)
        .order_by("index")
        .values_list("index", "decision", "final_thought", "final_action", "decision_ms")
    )
    return [
        steps,
        (row.ended_at, row.outcome),
        (task.status, task.lease_id, task.lease_expires_at),
        Proposal.objects.count(),
        Review.objects.count(),
        TaskEvent.objects.count(),
    ]


async def answers(ws: Socket, frame: str | bytes) -> dict[str, Any]:
    """The first event after ``frame``, checking the socket is still open after it."""
    if isinstance(frame, bytes):
        await ws.send_to(bytes_data=frame)
    else:
        await ws.send_to(text_data=frame)
    event = await ws.receive_json_from()
    await ws.send_json_to({"type": "state"})
    again = await ws.receive_json_from()
    assert again["event"] == "state", again  # the socket is still open and still answers
    return event


def decide(**change: Any) -> str:
    return json.dumps({**DECIDE, **change})


def without(field: str) -> str:
    return json.dumps({k: v for k, v in DECIDE.items() if k != field})


TOO_LONG = "x" * (socket_messages.MAX_THOUGHT_CHARS + 1)
REFUSED = [
    ("NUL in the thought", decide(thought="Open\x00 it"), "thought", "NUL"),
    ("NUL in typed text", decide(action={"type": "type", "content": "a\x00b"}), "action.content",
     "NUL"),
    ("NUL in a key name", decide(action={"type": "hotkey", "keys": ["ctrl", "\x00"]}),
     "action.keys[1]", "NUL"),
    ("a lone surrogate", '{"type": "decide", "step": 1, "decision": "corrected", '
     '"thought": "\\ud800", "action": {"type": "wait"}}', "thought", "Unicode"),
    ("negative decision time", decide(decision_ms=-5), "decision_ms", "from 0 to 86400000"),
    ("decision time of 2**40 ms", decide(decision_ms=2**40), "decision_ms", "from 0 to"),
    ("decision time as text", decide(decision_ms="1500"), "decision_ms", "integer"),
    ("the step as text", decide(step="1"), "step", "integer, not a string"),
    ("the step as a list", decide(step=[1]), "step", "integer, not an array"),
    ("the step as a boolean", decide(step=True), "step", "integer, not a boolean"),
    ("step 0", decide(step=0), "step", "from 1"),
    ("a step beyond any integer", decide(step=2**63), "step", "from 1 to"),
    ("no step", without("step"), "step", "integer, not null"),
    ("no decision", without("decision"), "decision", "string, not null"),
    ("the decision as a number", decide(decision=1), "decision", "string"),
    ("the proposal as text", decide(proposal="0"), "proposal", "integer"),
    ("a negative proposal", decide(proposal=-1), "proposal", "from 0"),
    ("the thought as a list", decide(thought=["a"]), "thought", "string, not an array"),
    ("a thought over the cap", decide(thought=TOO_LONG), "thought", "too long"),
    ("typed text over the cap", decide(action={"type": "type", "content": TOO_LONG}),
     "action.content", "too long"),
    ("the action as text", decide(action="click(100,200)"), "action", "object"),
    ("an observation that is no sha256", decide(observation="../x"), "observation", "sha256"),
    ("an unknown field", decide(extra=1), "extra", "no field 'extra'"),
    ("an unknown message type", json.dumps({"type": "teleport"}), "type", "Unknown message type"),
    ("no message type", json.dumps({"step": 1}), "type", "Unknown message type"),
    ("a heartbeat with a payload", json.dumps({"type": "heartbeat", "x": 1}), "x", "no field"),
    ("a JSON array", "[1, 2]", None, "must be a JSON object, not an array"),
    ("a JSON number", "3", None, "not a number"),
    ("text that is not JSON", "decide step 1", None, "not JSON"),
    ("truncated JSON", decide()[:-5], None, "not JSON"),
    ("deeply nested JSON", "[" * 30_000 + "]" * 30_000, None, "nested too deeply"),
    ("an oversized message", decide(thought="x" * socket_messages.MAX_MESSAGE_CHARS), None,
     "too large"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("frame", "field", "says"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_refused_input_gets_an_error_event_and_changes_nothing(episode, frame, field, says):
    before = stored(episode)

    async def exchange() -> dict[str, Any]:
        ws = await socket_of(episode.annotator, f"/ws/episodes/{episode.pk}/")
        assert (await ws.receive_json_from(timeout=5))["event"] == "state"
        event = await answers(ws, frame)
        await ws.disconnect()
        return event

    event = run(exchange)
    assert event["event"] == "error", event
    payload = event["payload"]
    assert payload["code"] == "invalid_message"
    assert says in payload["message"]
    assert payload["field"] == field
    assert stored(episode) == before


def test_a_refused_decision_names_its_step_so_the_client_stops_sending_it(episode):
    async def exchange() -> dict[str, Any]:
        ws = await socket_of(episode.annotator, f"/ws/episodes/{episode.pk}/")
        await ws.receive_json_from(timeout=5)
        event = await answers(ws, decide(decision_ms=-5))
        await ws.disconnect()
        return event

    assert run(exchange)["payload"]["step"] == 1


def test_a_binary_frame_is_refused_and_the_socket_stays_open(episode):
    before = stored(episode)

    async def exchange() -> dict[str, Any]:
        ws = await socket_of(episode.annotator, f"/ws/episodes/{episode.pk}/")
        await ws.receive_json_from(timeout=5)
        event = await answers(ws, decide().encode())
        await ws.disconnect()
        return event

    event = run(exchange)
    assert event["payload"]["code"] == "invalid_message"
    assert "Binary messages" in event["payload"]["message"]
    assert stored(episode) == before


def test_every_refusal_in_a_row_leaves_one_socket_open_and_the_step_open(episode):
    """One connection takes every bad message in turn and still works at the end."""
    before = stored(episode)

    async def exchange() -> list[dict[str, Any]]:
        ws = await socket_of(episode.annotator, f"/ws/episodes/{episode.pk}/")
        await ws.receive_json_from(timeout=5)
        events = [await answers(ws, frame) for _, frame, _, _ in REFUSED]
        await ws.send_json_to({"type": "state"})
        state = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return [*events, state]

    *errors, state = run(exchange)
    assert [e["event"] for e in errors] == ["error"] * len(REFUSED)
    assert state["payload"]["open_step"] == 1
    assert stored(episode) == before


def test_a_view_only_socket_gets_an_error_not_a_decision(episode, make_user, project):
    manager = make_user("mona", project, Role.MANAGER)
    before = stored(episode)

    async def exchange() -> dict[str, Any]:
        ws = await socket_of(manager, f"/ws/episodes/{episode.pk}/")
        await ws.receive_json_from(timeout=5)
        event = await answers(ws, decide())
        await ws.disconnect()
        return event

    event = run(exchange)
    assert (event["event"], event["payload"]["code"]) == ("error", "episode_error")
    assert "view-only" in event["payload"]["message"]
    assert stored(episode) == before


def test_the_notification_socket_refuses_input_and_stays_open(episode):
    async def exchange() -> list[dict[str, Any]]:
        ws = await socket_of(episode.annotator, "/ws/notifications/")
        hello = await ws.receive_json_from(timeout=5)
        events = [hello]
        for frame in ("not json", json.dumps({"type": "decide"})):
            await ws.send_to(text_data=frame)
            events.append(await ws.receive_json_from(timeout=5))
        await ws.send_to(bytes_data=b"\x00\x01")
        events.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return events

    hello, *errors = run(exchange)
    assert hello["event"] == "hello"
    assert [e["event"] for e in errors] == ["error"] * 3
    assert "not JSON" in errors[0]["payload"]["message"]
    assert "only sends notices" in errors[1]["payload"]["message"]


def test_a_well_formed_decision_after_refusals_is_stored_once(episode, monkeypatch):
    queued: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(
        episodes, "send_after_commit", lambda name, args, q: queued.append((name, args))
    )

    async def exchange() -> list[dict[str, Any]]:
        ws = await socket_of(episode.annotator, f"/ws/episodes/{episode.pk}/")
        await ws.receive_json_from()
        refused = await answers(ws, decide(thought="Open\x00 it"))
        await ws.send_to(text_data=decide())
        events = [refused]
        while len(events) < 3:  # the "decided" notice and the acknowledgement, in either order
            events.append(await ws.receive_json_from())
        await ws.disconnect()
        return events

    refused, *rest = run(exchange)
    assert refused["event"] == "error"
    ack = next((e for e in rest if e["event"] == "decision_ack"), None)
    assert ack is not None, rest
    assert ack["payload"] == {"step": 1, "duplicate": False}
    step = Step.objects.get(episode=episode, index=1)
    assert (step.decision, step.final_thought, step.decision_ms) == (
        "corrected",
        "Open the folder.",
        1500,
    )
    assert [name for name, _ in queued] == ["annotation.jobs.execute_step"]
