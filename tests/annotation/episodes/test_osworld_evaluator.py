"""The evaluator as OSWorld reads one, on a real sandboxed desktop: the postconfig runs first,
metrics combine by ``conj``, ``infeasible`` and giving up score as OSWorld scores them, a file
that is not there scores 0 and says so, and an evaluator that cannot run is no score at all.

And the episode's side: a desktop lost before its evaluation stores "not scored" with the
reason, and a second delivery of the job changes nothing. An evaluation whose job was lost (its
worker killed) is sent again as its next attempt, unless its postconfig may have changed the
desktop already, or it was lost too often: then it is "not scored" with the reason, and its
desktop goes back.
"""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from annotation.episodes import scoring
from annotation.episodes.leases import end_episode
from annotation.models import Episode, EpisodeOutcome, EvaluationStatus, Task
from vm_pool import pool
from vm_pool.desktop import DesktopControl
from vm_pool.evaluation.evaluator import EvaluationFailed, evaluate
from vm_pool.models import Desktop, DesktopStatus

pytestmark = pytest.mark.django_db(transaction=True)


def no_files(url: str) -> bytes:
    raise AssertionError(f"nothing is fetched here, not {url}")


@pytest.fixture
def control(sandboxed_control) -> DesktopControl:
    return sandboxed_control


def says(text: str) -> dict:
    """A getter of a command's output: ``text`` (the postconfig's file, for ``saved``)."""
    command = "cat ~/state.txt" if text == "saved" else f"printf {text}"
    return {"type": "vm_command_line", "command": command, "shell": True}


def rule(expected: str) -> dict:
    return {"type": "rule", "rules": {"expected": expected}}


def test_the_postconfig_runs_first_and_its_output_is_a_cache_file(control):
    save = {"command": "printf saved > ~/state.txt", "shell": True}
    read = {"command": ["cat", "~/state.txt"], "stdout": "o.txt"}
    evaluator = {
        "postconfig": [
            {"type": "execute", "parameters": save},
            {"type": "execute", "parameters": read},
        ],
        "func": ["exact_match", "compare_text_file"],
        "result": [says("saved"), {"type": "cache_file", "path": "o.txt"}],
        "expected": [rule("saved"), {"type": "vm_file", "path": "~/state.txt", "dest": "s.txt"}],
    }
    score = evaluate(control, evaluator, False, no_files)
    assert (score.value, score.conjunction) == (1.0, "and")
    assert [m["score"] for m in score.metrics] == [1.0, 1.0]
    # Files are shown by where they came from, not by the evaluation's own copies.
    assert (score.metrics[1]["result"], score.metrics[1]["expected"]) == ("o.txt", "~/state.txt")


def test_and_stops_at_the_first_zero_and_or_at_the_first_one(control):
    three = {
        "func": ["exact_match", "exact_match", "exact_match"],
        "result": [says("a"), says("b"), says("c")],
        "expected": [rule("a"), rule("x"), rule("c")],
    }
    score = evaluate(control, {**three, "conj": "and"}, False, no_files)
    assert score.value == 0.0 and score.reason == "metric 1 (exact_match) scored 0"
    assert [m["score"] for m in score.metrics] == [1.0, 0.0, "skipped"]

    score = evaluate(control, {**three, "conj": "or"}, False, no_files)
    assert score.value == 1.0 and [m["score"] for m in score.metrics] == [1.0, "skipped", "skipped"]

    partial = {**three, "expected": [rule("a"), rule("b"), rule("c")], "conj": "and"}
    assert evaluate(control, partial, False, no_files).value == 1.0


def test_infeasible_and_giving_up_score_as_osworld_does(control):
    infeasible = {"func": "infeasible"}
    assert evaluate(control, infeasible, True, no_files).value == 1.0
    assert evaluate(control, infeasible, False, no_files).value == 0.0
    feasible = {"func": "exact_match", "result": says("a"), "expected": rule("a")}
    assert evaluate(control, feasible, False, no_files).value == 1.0
    given_up = evaluate(control, feasible, True, no_files)
    assert given_up.value == 0.0 and given_up.reason == "the episode gave up (call_user)"


def test_a_missing_file_scores_0_and_says_which(control):
    evaluator = {
        "func": "compare_text_file",
        "result": {"type": "vm_file", "path": "~/never-written.txt", "dest": "r.txt"},
        "expected": {"type": "vm_file", "path": "~/never-written.txt", "dest": "e.txt"},
    }
    score = evaluate(control, evaluator, False, no_files)
    assert score.value == 0.0
    assert score.metrics[0]["result"] == "no file ~/never-written.txt"


@pytest.mark.parametrize(
    ("evaluator", "reason"),
    [
        ({"func": "no_such_metric", "result": says("a")}, "metric no_such_metric is not supported"),
        ({"func": "exact_match", "result": {"type": "telepathy"}}, "getter 'telepathy'"),
        ({"func": ["exact_match"], "result": [says("a"), says("b")]}, "'result' has 2 entries"),
        (
            {
                "func": "compare_table",
                "result": {"type": "vm_file", "path": "~/a.xlsx", "dest": "a.xlsx"},
                "options": {"rules": [{"type": "sparkline"}]},
            },
            "compare_table rule type 'sparkline' is not supported",
        ),
        (
            {
                "postconfig": [{"type": "launch", "parameters": {"command": ["no-such-program"]}}],
                "func": "exact_match",
                "result": says("a"),
                "expected": rule("a"),
            },
            r"postconfig: setup step 1 \(launch\) failed",
        ),
        ({"func": "exact_match", "result": [5]}, "'result' must be a getter config"),
        ({"func": "exact_match", "result": says("a"), "expected": "a"}, "'expected' must be"),
    ],
)
def test_an_evaluator_that_cannot_run_gives_no_score(control, evaluator, reason):
    with pytest.raises(EvaluationFailed, match=reason):
        evaluate(control, evaluator, False, no_files)


SAY_A = {"func": "exact_match", "result": says("a"), "expected": rule("a")}


def ended_on(
    desktop: Desktop, annotator, project, name: str, outcome: str, evaluator: dict = SAY_A
) -> Episode:
    """An episode of a task with an evaluator, on ``desktop`` leased now, ended ``outcome``."""
    leased = pool.lease_desktop(desktop.template, annotator, name, 60)
    assert leased.pk == desktop.pk
    task = Task.objects.create(
        project=project, external_id=name, instruction="Say a", evaluator=evaluator
    )
    episode = Episode.objects.create(
        task=task, annotator=annotator, desktop=desktop, desktop_generation=leased.generation
    )
    end_episode(episode.pk, outcome, outcome)
    episode.refresh_from_db()
    return episode


@pytest.fixture
def ready(control) -> Desktop:
    return Desktop.objects.get(status=DesktopStatus.READY)


def test_an_episode_whose_desktop_was_lost_is_not_scored(ready, make_user, project):
    episode = ended_on(ready, make_user("ann"), project, "t", EpisodeOutcome.FINISHED)
    assert episode.evaluation_status == EvaluationStatus.PENDING
    assert pool.release_desktop(ready.pk)  # lapsed and released before the job ran

    scoring.evaluate_episode(episode.pk)
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.task_success) == (EvaluationStatus.FAILED, None)
    assert episode.evaluation == {"error": "the desktop was lost"}
    scoring.evaluate_episode(episode.pk)  # delivered again: nothing changes
    episode.refresh_from_db()
    assert episode.evaluation == {"error": "the desktop was lost"}


def test_an_episode_is_scored_and_its_desktop_released_after(ready, make_user, project):
    ann = make_user("ann")
    episode = ended_on(ready, ann, project, "t", EpisodeOutcome.FINISHED)
    assert episode.evaluation_status == EvaluationStatus.PENDING
    assert Desktop.objects.get(pk=ready.pk).status == DesktopStatus.LEASED  # kept for it
    scoring.evaluate_episode(episode.pk)
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.task_success) == (EvaluationStatus.SCORED, 1.0)
    assert Desktop.objects.get(pk=ready.pk).status == DesktopStatus.RESETTING

    # An abandoned episode is never scored: its desktop goes back at once.
    assert pool.reset_desktop(ready.pk).status == DesktopStatus.READY
    abandoned = ended_on(ready, ann, project, "u", EpisodeOutcome.ABANDONED)
    assert abandoned.evaluation_status == EvaluationStatus.NONE
    assert Desktop.objects.get(pk=ready.pk).status == DesktopStatus.RESETTING


def silent_since_long() -> datetime:
    """A moment at which every evaluation queued or beaten until now has gone silent."""
    return timezone.now() + timedelta(seconds=scoring.stale_seconds() + 1)


def claimed_now() -> dict:
    return {"started_at": timezone.now().isoformat()}


def desktop_status(desktop: Desktop) -> str:
    return Desktop.objects.get(pk=desktop.pk).status


def test_an_evaluation_whose_job_was_lost_is_sent_again_and_the_lost_one_does_nothing(
    ready, make_user, project
):
    episode = ended_on(ready, make_user("ann"), project, "t", EpisodeOutcome.FINISHED)
    assert (episode.evaluation_status, episode.evaluation_attempt) == (EvaluationStatus.PENDING, 1)
    assert scoring.recover_lost() == 0  # queued just now: not silent

    assert scoring.recover_lost(silent_since_long()) == 1
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.evaluation_attempt) == (EvaluationStatus.PENDING, 2)
    # The lost job turns up after all: it is not the attempt in force, and touches nothing.
    scoring.evaluate_episode(episode.pk, 1)
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.evaluation) == (EvaluationStatus.PENDING, {})
    assert desktop_status(ready) == DesktopStatus.LEASED

    scoring.evaluate_episode(episode.pk, 2)
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.task_success) == (EvaluationStatus.SCORED, 1.0)
    assert desktop_status(ready) == DesktopStatus.RESETTING
    assert scoring.recover_lost(silent_since_long()) == 0  # scored: nothing to take up


def test_an_evaluation_lost_once_its_postconfig_may_have_run_is_not_read_again(
    ready, make_user, project
):
    save = {"command": "printf saved > ~/state.txt", "shell": True}
    evaluator = {**SAY_A, "postconfig": [{"type": "execute", "parameters": save}]}
    episode = ended_on(ready, make_user("ann"), project, "t", EpisodeOutcome.FINISHED, evaluator)
    # The row as a worker killed mid-evaluation leaves it: claimed, then silent.
    Episode.objects.filter(pk=episode.pk).update(evaluation=claimed_now())

    assert scoring.recover_lost(silent_since_long()) == 1
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.task_success) == (EvaluationStatus.FAILED, None)
    assert episode.evaluation == scoring.LOST_MIDWAY
    assert episode.evaluation_attempt == 1
    assert desktop_status(ready) == DesktopStatus.RESETTING


def test_an_evaluation_lost_midway_that_only_reads_is_read_again_and_one_lost_too_often_is_not(
    ready, make_user, project
):
    episode = ended_on(ready, make_user("ann"), project, "t", EpisodeOutcome.FINISHED)
    Episode.objects.filter(pk=episode.pk).update(evaluation=claimed_now())
    assert scoring.recover_lost(silent_since_long()) == 1  # reading twice changes nothing
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.evaluation_attempt) == (EvaluationStatus.PENDING, 2)

    assert scoring.recover_lost(silent_since_long()) == 1
    episode.refresh_from_db()
    assert episode.evaluation_attempt == scoring.MAX_ATTEMPTS
    assert scoring.recover_lost(silent_since_long()) == 1
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.evaluation) == (
        EvaluationStatus.FAILED,
        scoring.LOST_TOO_OFTEN,
    )
    assert desktop_status(ready) == DesktopStatus.RESETTING


def test_an_evaluation_that_beat_until_its_limit_is_stuck_and_not_sent_again(
    ready, make_user, project
):
    """Its heartbeat stopped at the job's limit while the job was still at work: sending it
    again would run into whatever stuck it."""
    episode = ended_on(ready, make_user("ann"), project, "t", EpisodeOutcome.FINISHED)
    started = timezone.now() - timedelta(seconds=scoring.EVALUATION_LEASE_S + 5)
    Episode.objects.filter(pk=episode.pk).update(
        evaluation={"started_at": started.isoformat()},
        evaluation_beat_at=started + timedelta(seconds=scoring.EVALUATION_LEASE_S),
    )
    assert scoring.recover_lost(silent_since_long()) == 1
    episode.refresh_from_db()
    assert (episode.evaluation_status, episode.evaluation_attempt) == (EvaluationStatus.FAILED, 1)
    assert episode.evaluation == scoring.STUCK
    assert episode.evaluation["limit"] == "time"
    assert desktop_status(ready) == DesktopStatus.RESETTING
