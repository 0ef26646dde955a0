"""The pair builder on episodes recorded through the live loop (design §5).

Each episode here is recorded the way production records it, on a real local desktop, with the
project's proposer pointed at the fake model server (scripted UI-TARS-1.5 answers, so every
proposal is known): ``start_episode``, then the jobs' own functions called in order in this
process: ``prepare_episode``, ``propose_step``, ``decide``, ``execute_step``. Only reviews and a
reviewer's step revision, which have no loop of their own, are written through
``review_episode`` and a ``StepRevision`` row.

The loop also queues those jobs on Celery and notifies sockets, all with
``transaction.on_commit``. These tests run inside a transaction that is rolled back (plain
``django_db``: the desktop pool runs in this process and needs no committed rows), so no job
ever reaches a broker, where a worker of another process could take it. Streamed proposal text
is sent at once, not after commit, so the channel layer is the in-memory one.
"""

from collections import Counter

import pytest
from django.utils import timezone

from annotation import jobs
from annotation.datasets import pairs as datasets
from annotation.datasets.records import (
    Context,
    ErrorCorrectionPair,
    Filters,
    HistoryTurn,
    PostReflectionPair,
    SftSample,
    StepTarget,
    Tally,
)
from annotation.episodes import loop as episodes
from annotation.episodes.reviews import review_episode
from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    Project,
    Step,
    StepRevision,
    Task,
)
from backend.accounts.roles import Role
from tests.support.fake_model_server import Reply, serving
from vm_pool import pool
from vm_pool.actions import ScreenSize
from vm_pool.models import DesktopStatus, DesktopTemplate

pytestmark = pytest.mark.django_db

MODEL = "ui-tars-1.5-7b"
SCREEN = ScreenSize(1280, 800)
TERMINAL = ["xterm", "-fa", "DejaVu Sans Mono", "-fs", "20", "-geometry", "40x6+100+100"]
INSTRUCTION = "Print one, two and three in the terminal"

# What the model answers (UI-TARS-1.5 text; 1280x800 is smart-resized to 1288x812, so its
# (644,406) is (640,400) on the screen), and the actions, as stored and as UI-TARS text.
SAY_ONE = "Thought: Type the first command.\nAction: type(content='echo one\\n')"
SAY_CLICK = "Thought: Click the terminal.\nAction: click(start_box='(644,406)')"
SAY_WRONG = "Thought: Type the third command.\nAction: type(content='echo wrong\\n')"
SAY_THREE = "Thought: Type the next command.\nAction: type(content='echo three\\n')"
SAY_WAIT = "Thought: Wait for the output.\nAction: wait()"
ONE = {"type": "type", "content": "echo one\n"}
TWO = {"type": "type", "content": "echo two\n"}
WRONG = {"type": "type", "content": "echo wrong\n"}
THREE = {"type": "type", "content": "echo three\n"}
FRESH = {"type": "hotkey", "keys": ["ctrl", "c"]}
CLICK = {"type": "click", "point": [640, 400]}
WAIT = {"type": "wait"}
DONE = {"type": "finished", "content": "one two three"}
TEXT = {
    "ONE": "type(content='echo one\\n')",
    "TWO": "type(content='echo two\\n')",
    "WRONG": "type(content='echo wrong\\n')",
    "THREE": "type(content='echo three\\n')",
    "FRESH": "hotkey(key='ctrl c')",
    "CLICK": "click(start_box='(640,400)')",
    "WAIT": "wait()",
    "DONE": "finished(content='one two three')",
}


class Recorder:
    """Drives one annotator's episodes through the loop, as the jobs and the socket would."""

    def __init__(self, server, project, annotator):
        self.server, self.project, self.annotator = server, project, annotator
        self.episode_id = 0

    def start(self) -> Episode:
        episode = episodes.start_episode(self.annotator, Project.objects.filter(pk=self.project.pk))
        self.episode_id = episode.pk
        episodes.prepare_episode(episode.pk)
        return episode

    def accept(self, index: int, answer: str) -> None:
        self._step(index, answer, Decision.ACCEPTED, proposal_rank=0)

    def keep_error(self, index: int, answer: str) -> None:
        self._step(index, answer, Decision.ERROR_KEPT, proposal_rank=0)

    def correct(self, index: int, answer: str, thought: str, action: dict) -> None:
        self._step(index, answer, Decision.CORRECTED, thought=thought, action=action)

    def _step(self, index: int, answer: str, decision: str, **decided) -> None:
        step = Step.objects.get(episode_id=self.episode_id, index=index)
        self.server.script(Reply.text(answer))
        jobs.propose_step(step.pk)
        receipt = episodes.decide(self.episode_id, self.annotator, index, decision, **decided)
        if not receipt.ends_episode:
            episodes.execute_step(step.pk)


@pytest.fixture
def recorded(loop_settings, make_user, project):
    """Episode A (finished: accepted, corrected, error_kept, reflection, a correction of an
    invalid proposal, a correction that finishes) and episode B (one accepted step, then
    abandoned), both by the same annotator."""
    template = DesktopTemplate.objects.create(name="pairs", width=1280, height=800)
    for _ in range(2):
        desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
        assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    ann = make_user("ann", project, Role.ANNOTATOR)
    setup = [{"type": "launch", "parameters": {"command": TERMINAL}}]
    Task.objects.create(project=project, external_id="a", instruction=INSTRUCTION, setup=setup)
    Task.objects.create(project=project, external_id="b", instruction="Open the Reports folder")
    with serving(model=MODEL) as server:
        Project.objects.filter(pk=project.pk).update(
            environment_template="pairs",
            model_settings={"base_url": server.base_url, "model": MODEL},
        )
        loop = Recorder(server, project, ann)
        a = loop.start()
        loop.accept(1, SAY_ONE)
        loop.correct(2, SAY_CLICK, "Type the second command.", TWO)
        loop.keep_error(3, SAY_WRONG)
        loop.correct(4, SAY_THREE, "That was wrong; start a fresh prompt.", FRESH)
        loop.correct(5, "I am not sure what to do.", "Type the third command.", THREE)
        loop.correct(6, SAY_WAIT, "All three are printed.", DONE)
        b = loop.start()
        loop.accept(1, SAY_CLICK)
        server.script(Reply.text("Thought: Wait.\nAction: wait()"))
        jobs.propose_step(Step.objects.get(episode=b, index=2).pk)
        episodes.end_episode(b.pk, EpisodeOutcome.ABANDONED, "abandoned by the annotator")
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.outcome, b.outcome) == (EpisodeOutcome.FINISHED, EpisodeOutcome.ABANDONED)
    return a, b, ann


def observations(episode: Episode) -> dict[int, str]:
    return dict(Step.objects.filter(episode=episode).values_list("index", "observation_id"))


class Golden:
    """The records episode A must give, written out from what was recorded."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.obs = observations(episode)
        finals = {
            1: ("accepted", "Type the first command.", ONE, "ONE"),
            2: ("corrected", "Type the second command.", TWO, "TWO"),
            3: ("error_kept", "Type the third command.", WRONG, "WRONG"),
            4: ("corrected", "That was wrong; start a fresh prompt.", FRESH, "FRESH"),
            5: ("corrected", "Type the third command.", THREE, "THREE"),
            6: ("corrected", "All three are printed.", DONE, "DONE"),
        }
        self.turns = {
            i: HistoryTurn(i, decision, self.obs[i], SCREEN, thought, action, TEXT[name])
            for i, (decision, thought, action, name) in finals.items()
        }

    def context(self, index: int) -> Context:
        window = range(max(1, index - 4), index + 1)
        return Context(
            instruction=INSTRUCTION,
            platform="desktop",
            history=tuple(self.turns[i] for i in range(1, index)),
            screenshots=tuple(self.obs[i] for i in window),
            screen_sizes=(SCREEN,) * len(window),
            split_task=self.episode.task_id,
        )

    def final(self, index: int) -> StepTarget:
        turn = self.turns[index]
        return StepTarget(turn.thought, turn.action_json, turn.action_text)

    def sft(self, index: int, kind: str) -> SftSample:
        return SftSample(self.episode.pk, index, self.context(index), self.final(index), kind)


def samples(project, kind: str, include_accepted: bool = False, **filters):
    tally = Tally()
    records = list(
        datasets.iter_samples(Filters(project.pk, **filters), kind, include_accepted, tally=tally)
    )
    return records, tally


def test_recorded_episode_gives_exactly_its_pairs_and_sft_samples(recorded, project):
    a, b, _ = recorded
    gold = Golden(a)
    assert len(set(gold.obs.values())) == 6  # every action changed the screen

    dpo, tally = samples(project, "dpo")
    assert dpo == [
        ErrorCorrectionPair(
            a.pk,
            2,
            gold.context(2),
            chosen=gold.final(2),
            rejected=StepTarget("Click the terminal.", CLICK, TEXT["CLICK"]),
        ),
        PostReflectionPair(
            a.pk,
            4,
            gold.context(4),  # its history holds the kept error of step 3
            chosen=gold.final(4),
            rejected=StepTarget("Type the next command.", THREE, TEXT["THREE"]),
        ),
        ErrorCorrectionPair(
            a.pk,
            6,
            gold.context(6),  # five screenshots: steps 2 to 6
            chosen=gold.final(6),
            rejected=StepTarget("Wait for the output.", WAIT, TEXT["WAIT"]),
        ),
    ]
    assert gold.context(4).history[2].decision == "error_kept"
    assert dpo[2].context.screenshots == tuple(gold.obs[i] for i in (2, 3, 4, 5, 6))
    # Step 5's model answer did not parse: its correction gives no pair, and says so.
    assert tally.skipped == Counter({datasets.NO_VALID_PROPOSAL: 1})
    assert tally.yielded == Counter({"ErrorCorrectionPair": 2, "PostReflectionPair": 1})

    sft, _ = samples(project, "sft")
    assert sft == [
        gold.sft(2, "corrected"),
        gold.sft(4, "reflection"),
        gold.sft(5, "corrected"),
        gold.sft(6, "corrected"),
    ]

    with_accepted, _ = samples(project, "sft", include_accepted=True)
    b_obs = observations(b)
    b_first = HistoryTurn(
        1, "accepted", b_obs[1], SCREEN, "Click the terminal.", CLICK, TEXT["CLICK"]
    )
    b_context = Context(
        "Open the Reports folder", "desktop", (), (b_obs[1],), (SCREEN,), split_task=b.task_id
    )
    assert with_accepted == [
        gold.sft(1, "accepted"),
        *sft,
        SftSample(
            b.pk, 1, b_context, StepTarget("Click the terminal.", CLICK, TEXT["CLICK"]), "accepted"
        ),
    ]

    # The abandoned episode is continual-pretraining data: its decided steps, in order.
    ct, _ = samples(project, "ct")
    assert [(s.episode_id, s.outcome, s.steps) for s in ct] == [(b.pk, "abandoned", (b_first,))]


def test_a_review_keeps_the_valid_prefix_and_the_latest_review_is_in_force(
    recorded, project, make_user
):
    a, b, _ = recorded
    gold = Golden(a)
    reviewer = make_user("rita", project, Role.REVIEWER)

    review_episode(a, reviewer, "rejected", 4, "step 4 should not interrupt")
    dpo, tally = samples(project, "dpo")
    assert dpo == [
        ErrorCorrectionPair(
            a.pk,
            2,
            gold.context(2),
            gold.final(2),
            StepTarget("Click the terminal.", CLICK, TEXT["CLICK"]),
        ),
    ]
    assert tally.skipped == Counter({datasets.NO_REFLECTIVE_STEP: 1})  # step 4 is cut off
    assert samples(project, "sft")[0] == [gold.sft(2, "corrected")]
    ct, _ = samples(project, "ct")
    assert [(s.episode_id, len(s.steps)) for s in ct] == [(a.pk, 6), (b.pk, 1)]
    assert [s.episode_id for s in samples(project, "ct", review_status="rejected")[0]] == [a.pk]

    review_episode(a, reviewer, "rejected", None, "wrong from the start")
    sft, tally = samples(project, "sft", include_accepted=True)
    assert [s.episode_id for s in sft] == [b.pk]
    assert tally.skipped == Counter({datasets.REJECTED_WITHOUT_PREFIX: 1})

    review_episode(a, reviewer, "accepted", None, "fine after all")
    accepted_only, _ = samples(project, "sft", review_status="accepted")
    assert [s.step_index for s in accepted_only] == [2, 4, 5, 6]
    assert [s.episode_id for s in samples(project, "ct")[0]] == [b.pk]


def test_a_reviewers_revision_is_the_final_step_everywhere(recorded, project, make_user):
    a, _, _ = recorded
    gold = Golden(a)
    reviewer = make_user("rita", project, Role.REVIEWER)
    first = Step.objects.get(episode=a, index=1)
    fixed = {"type": "type", "content": "echo ONE\n"}
    StepRevision.objects.create(
        step=first,
        number=1,
        decision=Decision.CORRECTED,
        final_thought="Type it in capitals.",
        final_action=fixed,
        author=reviewer,
    )

    dpo, _ = samples(project, "dpo")
    revised = StepTarget("Type it in capitals.", fixed, "type(content='echo ONE\\n')")
    assert dpo[0] == ErrorCorrectionPair(
        a.pk,
        1,
        gold.context(1),
        chosen=revised,
        rejected=StepTarget("Type the first command.", ONE, TEXT["ONE"]),  # what was accepted
    )
    later = dpo[1].context.history[0]
    assert (later.decision, later.thought, later.action_text) == (
        "corrected",
        revised.thought,
        revised.action_text,
    )
    assert [p.step_index for p in dpo] == [1, 2, 4, 6]


def test_filters_choose_the_episodes(recorded, project, make_user):
    a, b, ann = recorded
    now = timezone.now()

    def steps(**filters):
        records = samples(project, "sft", include_accepted=True, **filters)[0]
        return [(s.episode_id, s.step_index) for s in records]

    everything = steps()
    assert len(everything) == 6
    assert steps(annotator_id=ann.pk) == everything
    assert steps(annotator_id=make_user("otto").pk) == []
    assert steps(model_version=MODEL) == everything
    assert steps(model_version="ui-tars-2") == []
    assert steps(ended_until=a.ended_at) == []
    assert steps(ended_from=b.ended_at, ended_until=now) == [(b.pk, 1)]
    assert steps(review_status="unreviewed") == everything
    assert steps(review_status="accepted") == []
    other = Project.objects.create(name="Elsewhere")
    assert samples(other, "dpo")[0] == []
    with pytest.raises(ValueError, match="unknown dataset kind"):
        samples(project, "rlhf")


def test_samples_stream_a_chunk_of_episodes_at_a_time(recorded, project, django_assert_num_queries):
    # One query reads the project's gold threshold (none here), one the episodes; each chunk
    # then prefetches its steps, their revisions and (for pairs) their proposals: three queries
    # per chunk, whatever the number of steps.
    with django_assert_num_queries(2 + 2 * 3):
        records = datasets.iter_samples(Filters(project.pk), "dpo", chunk_size=1)
        assert len(list(records)) == 3
    with django_assert_num_queries(2 + 3):
        assert len(list(datasets.iter_samples(Filters(project.pk), "dpo", chunk_size=10))) == 3
