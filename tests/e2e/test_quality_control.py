"""Quality control end to end: three scripted annotators over the socket against real services
(ASGI, a Celery worker owning real desktops, an OpenAI-compatible model server), on a project of
30 tasks with 20% honeypots and overlap 2; then the scorecards, the pairs' agreement, the review
queue, a filtered export, what an annotator could read of a honeypot, and the manager's quality
page in Chromium.

The model proposes a click on each task's marker (the instruction names it), except on the
ordinary tasks with an odd number, where it clicks 200 px below; then it finishes. The people:

- gina does the six gold tasks first (the model is right there); the manager accepts them, marks
  each first step's gold as a box of ±15 px around the marker, and makes them honeypots, three
  each with a decoy: a wrong click at step 1 (three of them) or waiting instead of finishing
  at step 2 (the others);
- ann is always right: she approves a click on the marker and corrects any other to the marker;
- bob approves every proposal;
- cal corrects every click to 40 px right of the marker.
"""

import csv
import io
import json
import re
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client
from playwright.sync_api import expect

from annotation.datasets import exports, pairs
from annotation.datasets.records import Filters
from annotation.models import (
    Agreement,
    Episode,
    GoldStep,
    GoldVerdict,
    HoneypotRun,
    Project,
    Task,
)
from backend.accounts.roles import Role
from model_serving.uitars import to_model
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.support.fake_model_server import Reply, serving
from tests.support.live import CSRF, Socket, asgi, worker
from tests.support.services import free_port
from vm_pool import pool
from vm_pool.actions import Point, ScreenSize
from vm_pool.models import DesktopStatus, DesktopTemplate

BROKER, CHANNELS = "redis://127.0.0.1:6379/6", "redis://127.0.0.1:6379/7"
SHOTS = Path(__file__).resolve().parents[2] / "var" / "e2e-shots"
SCREEN = ScreenSize(1280, 800)
GOLD = (3, 8, 13, 18, 23, 28)  # task numbers of the gold tasks, among 30
DECOY_AT = {3: 1, 8: 2, 13: 1, 18: 2, 23: 1, 28: 2}  # the gold task's step that shows a decoy
FINISHED = {"type": "finished", "content": ""}
MARKER = re.compile(r"marker at (\d+),(\d+)")
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def marker(number: int) -> tuple[int, int]:
    return 100 + 35 * number, 150 + 17 * number


def model_reply(body: Any) -> Reply:
    """Click the instruction's marker (200 px below it on odd ordinary tasks); then finish."""
    text = json.dumps(body["messages"])
    if any(m["role"] == "assistant" for m in body["messages"]):
        return Reply.text("Thought: The marker is clicked.\nAction: finished(content='')")
    x, y = (int(v) for v in MARKER.search(text).groups())
    number = (x - 100) // 35
    if number % 2 == 1 and number not in GOLD:
        y += 200
    at = to_model(Point(x, y), SCREEN, "uitars15")
    return Reply.text(f"Thought: Click the marker.\nAction: click(start_box='({at.x},{at.y})')")


class Person:
    """An annotator over the REST API and the episode's socket, keeping every payload read."""

    def __init__(self, server: str, user, project: Project, script: str) -> None:
        client = Client()
        client.force_login(user)
        self.cookie = f"sessionid={client.cookies['sessionid'].value}"
        self.http = httpx.Client(
            base_url=f"http://{server}",
            headers={"Cookie": f"{self.cookie}; csrftoken={CSRF}", "X-CSRFToken": CSRF},
            timeout=30,
        )
        self.server, self.project, self.script = server, project, script
        self.read: dict[int, list[tuple[str, Any]]] = {}  # episode -> (what, payload)

    def work_one(self) -> int | None:
        """Start the next episode and decide it to the end; its id, or None when no task is
        left."""
        deadline = time.monotonic() + 60
        while True:  # a desktop is being reset after the last episode: the pool says so
            started = self.http.post("/api/episodes/start/", json={"project": self.project.pk})
            busy = started.status_code == 409 and "no_desktop_available" in started.text
            if not busy or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if started.status_code == 404:
            return None
        assert started.status_code == 201, started.text
        episode = started.json()["episode"]
        read = self.read.setdefault(episode, [("start", started.json())])
        ws = Socket(self.server, episode, self.cookie)
        state = ws.next("state")
        x, y = (int(v) for v in MARKER.search(state["task"]["instruction"]).groups())
        # What the episode holds at the socket's opening depends on how far its setup and the
        # first proposal had come: it is read once they have, the same for every episode.
        first = self._proposal(ws, state, 1)
        read.append(("episode", self.http.get(f"/api/episodes/{episode}/").json()))
        again = Socket(self.server, episode, self.cookie)
        read.append(("socket:state", again.next("state")))
        again.close()
        stream = self.http.post(f"/api/episodes/{episode}/stream/")
        read.append(("stream", stream.json()))
        step = 1
        while True:  # until a finishing step is decided
            proposed = (first if step == 1 else self._proposal(ws, state, step))["action"]
            decision = self._decide(proposed, (x, y))
            ws.send(type="decide", step=step, **decision)
            ws.next("decision_ack", step=step)
            if decision.get("action", proposed)["type"] == "finished":
                break
            step += 1
        ws.next("ended")
        ws.close()
        opening = next(i for i, e in enumerate(ws.events) if e["event"] == "state")
        for i, event in enumerate(ws.events):
            if i != opening:  # the opening state was read above, settled
                read.append((f"socket:{event['event']}", event["payload"]))
        shots = [e["payload"]["screenshot"] for e in ws.events if e["event"] == "observation"]
        shot = shots[0] if shots else state["steps"][0]["screenshot"]
        image = self.http.get(f"/api/screenshots/{shot}/")
        read.append(
            ("screenshot", {"status": image.status_code, "type": image.headers["content-type"]})
        )
        read.append(("ended", self.http.get(f"/api/episodes/{episode}/").json()))
        return episode

    def _proposal(self, ws: Socket, state: dict, step: int) -> dict:
        for known in state["steps"]:
            if known["step"] == step and known["proposals"]:
                return known["proposals"][0]
        return ws.next("proposal", step=step)["candidates"][0]

    def _decide(self, proposed: dict, target: tuple[int, int]) -> dict:
        accept = {"decision": "accepted", "proposal": 0}
        if self.script == "approves" or proposed["type"] == "finished":
            return accept
        if proposed["type"] != "click":  # the task is done once the marker is clicked
            return {"decision": "corrected", "thought": "Done.", "action": FINISHED}
        if self.script == "right":
            px, py = proposed["point"]
            if abs(px - target[0]) <= 15 and abs(py - target[1]) <= 15:
                return accept
            click = {"type": "click", "point": list(target)}
        else:  # 40 px off target
            click = {"type": "click", "point": [target[0] + 40, target[1]]}
        return {"decision": "corrected", "thought": "Click the marker.", "action": click}


def pattern(value: Any) -> Any:
    """What a payload looks like, not what it says: keys and types, and for strings their kind
    (a time, a hash, a random token, a path with its numbers as 9, a word, or free text)."""
    if isinstance(value, dict):
        return {k: pattern(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return sorted({json.dumps(pattern(v), sort_keys=True) for v in value})
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    if isinstance(value, int | float):
        return type(value).__name__
    if re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d)?", value):
        return "<time>"
    if re.fullmatch(r"[0-9a-f]{64}", value):
        return "<sha256>"
    if re.fullmatch(r"[A-Za-z0-9_-]{20,}", value):
        return "<token>"
    if value.startswith(("/", "ws://", "http://")):
        value = re.sub(r"token=[A-Za-z0-9_-]+", "token=<token>", value)
        return re.sub(r"[0-9a-f]{16,}", "<hex>", re.sub(r"\d+", "9", value))
    if re.fullmatch(r"[a-z_]+", value):
        return "<word>"
    return "<text>"


# Fields whose value is one of a few names: compared as they are, not as a pattern.
NAMED = {"task_status", "status", "outcome", "decision", "mode", "kind", "event",
         "evaluation_status", "model_name", "model_version"}  # fmt: skip


def shapes(read: list[tuple[str, Any]]) -> set[str]:
    """Every ``what.path=pattern`` of the payloads read (lists as their items' patterns)."""
    seen: set[str] = set()

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}", item)
        elif isinstance(value, list):
            for item in value:
                walk(f"{prefix}[]", item)
            if not value:
                seen.add(f"{prefix}=[]")
        elif prefix.rsplit(".", 1)[-1] in NAMED:
            seen.add(f"{prefix}={value!r}")  # a status or a kind is its value
        else:
            seen.add(f"{prefix}={pattern(value)}")

    for what, payload in read:
        walk(what, payload)
    return seen


def test_three_annotators_honeypots_and_overlap_end_to_end(host, make_user, project, monkeypatch):
    DesktopTemplate.objects.create(name="quality", width=1280, height=800)
    people = {
        name: make_user(name, project, Role.ANNOTATOR) for name in ("gina", "ann", "bob", "cal")
    }
    mona = make_user("mona", project, Role.MANAGER)
    tasks = {
        n: Task.objects.create(
            project=project,
            external_id=f"task-{n:02d}",
            instruction=f"Click the marker at {marker(n)[0]},{marker(n)[1]}",
            max_steps=5,
            # The gold tasks come first in the pool: gina does them before anyone else works.
            priority=1 if n in GOLD else 0,
        )
        for n in range(1, 31)
    }
    for _ in range(2):
        desktop = pool.start_desktop(pool.create_desktop(DesktopTemplate.objects.get(), host).pk)
        assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    port = free_port()
    server = f"127.0.0.1:{port}"

    with ExitStack() as stack:
        model = stack.enter_context(serving())
        model.responder = model_reply
        Project.objects.filter(pk=project.pk).update(
            environment_template="quality",
            model_settings={"base_url": model.base_url, "model": model.model},
        )
        stack.enter_context(worker(host, BROKER, CHANNELS, queues="default"))
        stack.enter_context(asgi(host, port, BROKER, CHANNELS))
        manager = httpx.Client(base_url=f"http://{server}", timeout=30, headers=_session(mona))

        # Gold: gina's six episodes, accepted, marked and made honeypots.
        gina = Person(server, people["gina"], project, "right")
        gold_episodes = [gina.work_one() for _ in GOLD]
        for episode_id in gold_episodes:
            episode = Episode.objects.get(pk=episode_id)
            number = int(episode.task.external_id.removeprefix("task-"))
            assert number in GOLD
            x, y = marker(number)
            reviewed = manager.post(
                f"/api/episodes/{episode_id}/reviews/", json={"verdict": "accepted"}
            )
            assert reviewed.status_code == 201, reviewed.text
            box = {"type": "click", "region": [x - 15, y - 15, x + 15, y + 15]}
            steps = {"steps": [{"step": 1, "answers": [box]}, {"step": 2}]}
            marked = manager.put(f"/api/episodes/{episode_id}/gold/", json=steps)
            assert marked.status_code == 200, marked.text
            wrong = {"type": "click", "point": [x, y + 200]}
            if DECOY_AT[number] == 2:
                wrong = {"type": "wait"}
            decoy = {"thought": "Click the marker.", "action": wrong}
            made = manager.put(f"/api/episodes/{episode_id}/honeypot/",
                               json={"decoys": {str(DECOY_AT[number]): decoy}})  # fmt: skip
            assert made.status_code == 200, made.text
        changed = manager.patch(
            f"/api/projects/{project.pk}/", json={"overlap": 2, "honeypot_rate": 0.2}
        )
        assert changed.status_code == 200, changed.text

        # The three annotators take turns until nobody has a task left.
        crowd = [Person(server, people[n], project, s) for n, s in
                 (("ann", "right"), ("bob", "approves"), ("cal", "off"))]  # fmt: skip
        done = {p.script: True for p in crowd}
        while any(done.values()):
            for person in crowd:
                if done[person.script]:
                    done[person.script] = person.work_one() is not None

        # The worker checks each episode as it ends: wait for the last ones' checks.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            HoneypotRun.objects.filter(scored_at__isnull=True).exists()
            or Agreement.objects.count() < 2 * 24  # two steps compared per ordinary task
        ):
            time.sleep(0.2)
        runs = {r.episode_id: r for r in HoneypotRun.objects.select_related("honeypot__task")}
        ordinary = Episode.objects.exclude(pk__in=[*gold_episodes, *runs])
        assert ordinary.count() == 48  # 24 ordinary tasks, each by 2 different annotators
        for task in Task.objects.filter(pk__in=[tasks[n].pk for n in tasks if n not in GOLD]):
            assert len({e.annotator_id for e in task.episodes.all()}) == 2
        _no_gold_twice_in_a_row(people, runs)

        # Scorecards: what each script implies, from the runs each person happened to get.
        cards = {
            c["annotator"]: c
            for c in manager.get(f"/api/projects/{project.pk}/scorecards/").json()["scorecards"]
        }
        mine = {
            name: [r for r in runs.values() if r.episode.annotator.username == name]
            for name in ("ann", "bob", "cal")
        }
        assert all(mine.values()), {n: len(r) for n, r in mine.items()}  # all met gold
        # ann: both steps right. bob approves the decoy: a miss at step 1, or at step 2 after a
        # right step 1. cal: a miss at step 1, always. Scoring stops at a miss.
        at_2 = sum(DECOY_AT[_number(r.honeypot.task)] == 2 for r in mine["bob"])
        expected = {
            "ann": (2 * len(mine["ann"]), 2 * len(mine["ann"])),
            "bob": (len(mine["bob"]) + at_2, at_2),
            "cal": (len(mine["cal"]), 0),
        }
        assert {n: (cards[n]["gold_steps"], cards[n]["gold_right"]) for n in expected} == expected
        assert cards["ann"]["gold_accuracy"] == 1.0 and cards["cal"]["gold_accuracy"] == 0.0
        assert cards["bob"]["gold_accuracy"] == at_2 / (len(mine["bob"]) + at_2)  # at most 0.5
        missed = GoldVerdict.objects.filter(run__episode__annotator__username="bob", right=False)
        assert missed.count() == len(mine["bob"])

        # Agreement per pair: step 1 agrees only when both approved a right click (ann and
        # bob on even tasks); finishing always agrees.
        report = manager.get(f"/api/projects/{project.pk}/scorecards/").json()
        by_pair = {tuple(p["annotators"]): p for p in report["pairs"]}
        for (a, b), entry in by_pair.items():
            shared = (
                Task.objects.filter(episodes__annotator__username=a)
                .filter(episodes__annotator__username=b)
                .exclude(pk__in=[tasks[n].pk for n in GOLD])
                .distinct()
            )
            even = sum(_number(t) % 2 == 0 for t in shared)
            agreed_first = even if {a, b} == {"ann", "bob"} else 0
            assert (entry["compared_steps"], entry["agreed_steps"]) == (
                2 * shared.count(),
                shared.count() + agreed_first,
            ), (a, b)
        assert set(by_pair) == {("ann", "bob"), ("ann", "cal"), ("bob", "cal")}

        # The disagreeing tasks' episodes lead the review queue.
        disputed = set(Agreement.objects.filter(agree=False).values_list("task_id", flat=True))
        expected = {t.pk for t in Task.objects.filter(episodes__annotator__username="cal").exclude(
            pk__in=[tasks[n].pk for n in GOLD])} | {
            t.pk for n, t in tasks.items() if n % 2 and n not in GOLD
            and {e.annotator.username for e in t.episodes.all()} == {"ann", "bob"}}  # fmt: skip
        assert disputed == expected
        queue = manager.get(f"/api/review-queue/?project={project.pk}&page_size=200").json()[
            "results"
        ]
        first = [e["task"] for e in queue[: 2 * len(disputed)]]
        assert set(first) == disputed

        # An export at gold accuracy >= 0.8: ann's work, and bob's where ann agreed with him.
        filters = Filters(project_id=project.pk, min_gold_accuracy=0.8)
        samples = list(pairs.iter_samples(filters, "sft", include_accepted=True))
        kept = {s.episode_id for s in samples}
        ann_work = set(ordinary.filter(annotator__username="ann").values_list("pk", flat=True))
        agreed_bob = set(ordinary.filter(annotator__username="bob", task__in=[
            t for n, t in tasks.items() if n % 2 == 0 and n not in GOLD]).filter(
            task__episodes__annotator__username="ann").values_list("pk", flat=True))  # fmt: skip
        assert kept == ann_work | agreed_bob
        assert len(samples) == 2 * len(kept)  # a click and the finish per episode
        assert not kept & set(runs)  # no honeypot run is data
        summary = exports.quality_summary(filters)
        assert summary["gold_passing_annotators"] == ["ann"]  # gina never ran her own gold
        assert summary["corroborated_episodes"] == len(agreed_bob)
        assert summary["honeypot_runs_left_out"] == len(runs)

        # What ann read of a honeypot run and of an ordinary episode looks the same.
        ann = crowd[0]
        gold_read = [item for e in ann.read if e in runs for item in ann.read[e]]
        plain_read = [item for e in ann.read if e not in runs for item in ann.read[e]]
        # Everything read of a honeypot was read of ordinary tasks too (the converse need
        # not hold: ann corrected ordinary steps).
        gold_shapes, plain_shapes = shapes(gold_read), shapes(plain_read)
        assert gold_shapes <= plain_shapes, sorted(gold_shapes - plain_shapes)

        _check_quality_page(stack, monkeypatch, server, project, cards, manager, gold_episodes[0])


def _session(user) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    return {
        "Cookie": f"sessionid={client.cookies['sessionid'].value}; csrftoken={CSRF}",
        "X-CSRFToken": CSRF,
    }


def _number(task: Task) -> int:
    return int(task.external_id.removeprefix("task-"))


def _no_gold_twice_in_a_row(people: dict, runs: dict) -> None:
    for name in ("ann", "bob", "cal"):
        order = Episode.objects.filter(annotator=people[name]).order_by("started_at")
        flags = [e.pk in runs for e in order]
        assert not any(a and b for a, b in zip(flags, flags[1:], strict=False)), (name, flags)


def _check_quality_page(stack, monkeypatch, server, project, cards, manager, gold_episode) -> None:
    """The manager's quality page shows the API's figures; the CSV holds the same. On a gold
    episode's step the manager drags a new target box, and it is the step's gold."""
    browser = stack.enter_context(chromium(monkeypatch))
    context, page, errors = sign_in(browser, f"http://{server}", "mona",
                                    f"/app/manage/projects/{project.pk}/quality")  # fmt: skip
    table = page.get_by_test_id("scorecards")
    for name in ("ann", "bob", "cal"):
        row = table.get_by_role("row").filter(has=page.get_by_role("cell", name=name, exact=True))
        card = cards[name]
        low, high = card["gold_accuracy_low"], card["gold_accuracy_high"]
        counts = f"{card['gold_right']} of {card['gold_steps']}"
        gold = f"{card['gold_accuracy']:.2f} ({low:.2f}–{high:.2f}, {counts})"
        expect(row.get_by_role("cell").nth(4)).to_have_text(gold)
    expect(page.get_by_test_id("agreement-pairs").get_by_role("row")).to_have_count(4)
    disputed = Agreement.objects.filter(agree=False).values("task").distinct().count()
    expect(page.get_by_test_id("disputed-tasks").locator("tbody tr")).to_have_count(disputed)
    expect(page.get_by_test_id("gold-chart").locator("circle").first).to_be_attached()
    expect(page.get_by_test_id("honeypots").get_by_role("row")).to_have_count(7)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "manager-quality-control.png"), full_page=True)
    assert accessibility_problems(page) == []
    errors.assert_none()
    context.close()
    _draw_gold(browser, server, gold_episode)
    rows = list(csv.DictReader(io.StringIO(manager.get(
        f"/api/projects/{project.pk}/scorecards/?as=csv").text)))  # fmt: skip
    for row in rows:
        card = cards[row["annotator"]]
        assert (int(row["gold_steps"]), int(row["gold_right"]), int(row["compared_steps"])) == (
            card["gold_steps"],
            card["gold_right"],
            card["compared_steps"],
        )


def _draw_gold(browser, server: str, episode_id: int) -> None:
    context, page, errors = sign_in(browser, f"http://{server}", "mona",
                                    f"/app/manage/episodes/{episode_id}")  # fmt: skip
    panel = page.get_by_test_id("gold-panel")
    x, y = marker(GOLD[0])
    expect(panel.get_by_test_id("gold-stored")).to_contain_text(
        f"click inside [{x - 15}, {y - 15}, {x + 15}, {y + 15}] (from review)"
    )
    canvas = panel.get_by_test_id("gold-canvas")
    canvas.scroll_into_view_if_needed()
    frame = canvas.bounding_box()
    scale = frame["width"] / SCREEN.width

    def at(px: int, py: int) -> tuple[float, float]:
        return frame["x"] + px * scale, frame["y"] + py * scale

    page.mouse.move(*at(x - 40, y - 30))
    page.mouse.down()
    page.mouse.move(*at(x + 10, y + 5), steps=5)
    page.mouse.move(*at(x + 40, y + 30), steps=5)
    page.mouse.up()
    expect(panel.get_by_test_id("gold-answer")).to_contain_text("Will save: click inside [")
    panel.get_by_role("button", name="Save as gold for step 1").click()
    expect(panel.get_by_role("status")).to_have_text("Step 1 is gold.")
    (region,) = [a["region"] for a in GoldStep.objects.get(step__episode_id=episode_id,
                                                          step__index=1).answers]  # fmt: skip
    # The drag's corners, give or take the rounding of a scaled screenshot.
    assert all(abs(got - want) <= 2 for got, want in zip(region, [x - 40, y - 30, x + 40, y + 30],
                                                         strict=True)), region  # fmt: skip
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "manager-gold-box.png"), full_page=True)
    assert accessibility_problems(page) == []
    errors.assert_none()
    context.close()
