"""The validation function V(s) ∈ {0, 1} of a rollout, composed per project.

Every part gives a verdict (passed, failed, or not known yet) and a reason; all are recorded on
the rollout (``Rollout.validation``) with the whole:

- **rules** (always): the rule checks of ``annotation.rollouts.rules`` over the rollout's
  records: no-op actions, loops, invalid outputs, call_user, stopped by a rule. Each check is
  reported; the part passes when all do.
- **evaluator** (when the task has one): the score the task's OSWorld evaluator gave the
  episode must reach ``min_task_success`` (default 1). An evaluator that could not run is a
  verdict not known, never a pass; one still running is waited for. So is one that scores above
  0 with no work done (its self-check, ``annotation.projects.evaluator_checks``), until a manager
  clears it.
- **judge** (when the project names one: ``judge.base_url`` and ``judge.model``): a VLM over an
  OpenAI-compatible endpoint scores the trajectory (``model_serving.judge``, its prompt
  versioned); it passes at ``judge.threshold`` (default 0.5). A judge that does not answer is a
  verdict not known.
- **human** (when ``human_review`` is on): the latest review of the rollout's episode, accepted
  or rejected; not known until someone reviews it.

V is 0 as soon as one part failed, 1 when every part passed, and not known otherwise: a rollout
whose V is not known is in no dataset. V = 1 makes its steps SFT samples (``source=rollout``,
rejection sampling), V = 0 makes its trajectory a CT sample.

Project settings (``Project.validation_settings``)::

    {"min_task_success": 1.0, "human_review": false,
     "judge": {"base_url": "http://judge:8000/v1", "model": "qwen2.5-vl-72b", "threshold": 0.5}}

The judge's ``api_key`` is write-only and bound to ``judge.base_url``: a write that moves the
judge to another endpoint without a key clears the stored one (``model_serving.endpoint_keys``).
"""

from dataclasses import asdict, dataclass
from typing import Any

from django.utils import timezone

from annotation.models import Episode, EvaluationStatus, Review, Rollout, RolloutStatus, Step
from annotation.projects import evaluator_checks
from annotation.rollouts import rules as rollout_rules
from annotation.rollouts.batches import counted
from backend.errors import DomainError
from model_serving import endpoint_keys, judge
from model_serving.uitars import action_text
from vm_pool.actions import Action, ScreenSize
from vm_pool.models import Screenshot
from vm_pool.screen.screenshots import screenshot_png

DEFAULT_MIN_TASK_SUCCESS = 1.0
DEFAULT_JUDGE_THRESHOLD = 0.5
SETTINGS_KEYS = {"min_task_success", "human_review", "judge"}
JUDGE_KEYS = {"base_url", "model", "threshold", "api_key"}


class EvaluationPending(Exception):
    """The task's evaluator has not scored the episode yet: validate again later."""


class SettingsInvalid(DomainError):
    code = "validation_settings_invalid"


@dataclass(frozen=True)
class Part:
    name: str
    passed: bool | None  # None: not known (yet)
    reason: str
    details: dict[str, Any]


def check_settings(raw: Any) -> dict[str, Any]:
    """A project's validation settings, checked; a clear error for anything else."""
    if not isinstance(raw, dict):
        raise SettingsInvalid("validation settings are an object")
    unknown = set(raw) - SETTINGS_KEYS
    if unknown:
        raise SettingsInvalid(f"unknown validation settings {sorted(unknown)}")
    share = raw.get("min_task_success", DEFAULT_MIN_TASK_SUCCESS)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise SettingsInvalid("min_task_success is a score from 0 to 1")
    if not isinstance(raw.get("human_review", False), bool):
        raise SettingsInvalid("human_review is true or false")
    if "judge" in raw:
        given = raw["judge"]
        if not isinstance(given, dict) or set(given) - JUDGE_KEYS:
            raise SettingsInvalid(f"judge takes {sorted(JUDGE_KEYS)}")
        if not isinstance(given.get("base_url"), str) or not isinstance(given.get("model"), str):
            raise SettingsInvalid("judge needs base_url and model")
        try:
            endpoint_keys.endpoint(given["base_url"])
        except ValueError as error:
            raise SettingsInvalid(f"judge.base_url {error}") from None
        if given.get("api_key") is not None and not isinstance(given["api_key"], str):
            raise SettingsInvalid("judge.api_key is a string")
        threshold = given.get("threshold", DEFAULT_JUDGE_THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise SettingsInvalid("judge.threshold is a score from 0 to 1")
        if not 0 <= threshold <= 1:
            raise SettingsInvalid("judge.threshold is a score from 0 to 1")
    return raw


def written_settings(stored: dict[str, Any], raw: Any) -> dict[str, Any]:
    """The settings a write asks for, checked, over the ``stored`` ones: the judge's key is
    kept, replaced or cleared by the rules of ``model_serving.endpoint_keys``."""
    given = check_settings(raw)
    if "judge" not in given:
        return given
    return {**given, "judge": endpoint_keys.written(stored.get("judge") or {}, given["judge"])}


def validate(rollout_id: int) -> bool | None:
    """Judge an ended rollout and record every part; V (None: not known yet).

    Raises ``EvaluationPending`` while the task's evaluator is still scoring the episode."""
    rollout = Rollout.objects.select_related("batch__project", "task", "episode").get(pk=rollout_id)
    if rollout.status not in (RolloutStatus.ENDED, RolloutStatus.VALIDATED):
        return rollout.verdict
    # A sign of life of the validation (it retries while the evaluator scores): one whose job
    # was lost goes silent and is sent again (``rollouts.recover_stale``).
    Rollout.objects.filter(pk=rollout.pk, status=RolloutStatus.ENDED).update(
        heartbeat_at=timezone.now()
    )
    episode = rollout.episode
    if episode is None:  # queued again for a new attempt meanwhile
        return None
    options = rollout.batch.project.validation_settings or {}
    parts = [_rules(rollout, episode)]
    if rollout.task.evaluator.get("func"):
        parts.append(_evaluator(episode, options))
    if options.get("judge"):
        parts.append(_judge(rollout, episode, options["judge"]))
    if options.get("human_review"):
        parts.append(_human(episode))
    verdict = whole(parts)
    with counted(rollout.batch_id):
        Rollout.objects.filter(pk=rollout.pk, episode=episode).update(
            status=RolloutStatus.VALIDATED,
            verdict=verdict,
            validation={
                "parts": [asdict(p) for p in parts],
                "verdict": verdict,
                "routed": {True: "sft", False: "ct", None: ""}[verdict],
                "prompt_version": judge.JUDGE_PROMPT_VERSION if options.get("judge") else "",
                "at": timezone.now().isoformat(),
            },
        )
    return verdict


def whole(parts: list[Part]) -> bool | None:
    if any(p.passed is False for p in parts):
        return False
    if any(p.passed is None for p in parts):
        return None
    return True


def _records(rollout: Rollout) -> list[rollout_rules.StepRecord]:
    return [rollout_rules.StepRecord.from_json(r) for r in rollout.records]


def _rules(rollout: Rollout, episode: Episode) -> Part:
    stop = rollout.stop_reason
    known = {reason.value for reason in rollout_rules.StopReason}
    checks = rollout_rules.rule_checks(
        _records(rollout),
        episode.outcome,
        rollout_rules.StopReason(stop) if stop in known else None,
        rules=rollout_rules.StopRules.from_json(rollout.batch.stop_rules),
    )
    failed = [c for c in checks if not c.passed]
    reason = "; ".join(c.reason for c in failed) if failed else "every rule check passed"
    return Part(
        "rules",
        not failed,
        reason,
        {"checks": [asdict(c) for c in checks]},
    )


def _evaluator(episode: Episode, options: dict[str, Any]) -> Part:
    if episode.evaluation_status == EvaluationStatus.PENDING:
        raise EvaluationPending(f"episode {episode.pk} is still being scored")
    needed = float(options.get("min_task_success", DEFAULT_MIN_TASK_SUCCESS))
    untrusted = evaluator_checks.blocks_validation(episode.task)
    if untrusted:
        return Part("evaluator", None, untrusted, {})
    if episode.evaluation_status != EvaluationStatus.SCORED or episode.task_success is None:
        error = (episode.evaluation or {}).get("error", "the episode was not scored")
        return Part("evaluator", None, f"the task's evaluator gave no score: {error}", {})
    passed = episode.task_success >= needed
    return Part(
        "evaluator",
        passed,
        f"task success {episode.task_success:g} {'reaches' if passed else 'is below'} {needed:g}",
        {"task_success": episode.task_success, "min_task_success": needed},
    )


def _judge(rollout: Rollout, episode: Episode, given: dict[str, Any]) -> Part:
    threshold = float(given.get("threshold", DEFAULT_JUDGE_THRESHOLD))
    if not episode.steps.filter(decided_at__isnull=False).exists():
        return Part("judge", None, "not asked: the model took no step", {})
    try:
        verdict = judge.judge(
            _judge_request(rollout, episode),
            base_url=given["base_url"],
            model=given["model"],
            api_key=given.get("api_key", ""),
        )
    except judge.JudgeFailed as error:
        return Part("judge", None, f"the judge gave no verdict: {error}", {})
    passed = judge.passes(verdict, threshold)
    return Part(
        "judge",
        passed,
        f"score {verdict.score:g} {'reaches' if passed else 'is below'} {threshold:g}: "
        f"{verdict.reason}",
        {
            "score": verdict.score,
            "threshold": threshold,
            "model": verdict.model,
            "prompt_version": verdict.prompt_version,
        },
    )


def _judge_request(rollout: Rollout, episode: Episode) -> judge.JudgeRequest:
    steps = list(
        Step.objects.filter(episode=episode, decided_at__isnull=False)
        .select_related("observation")
        .order_by("index")
    )

    # The screen after the last action, as the rules saw it.
    last_seen = rollout.records[-1].get("screen_after") if rollout.records else None
    final = Screenshot.objects.filter(pk=last_seen).first() if last_seen else None

    def text(step: Step) -> str:
        screen = ScreenSize(step.observation.width, step.observation.height)
        return action_text(Action.from_json(step.final_action), screen, "uitars15")

    return judge.JudgeRequest(
        instruction=rollout.task.instruction,
        steps=tuple(
            judge.JudgeStep(s.final_thought, text(s), screenshot_png(s.observation)) for s in steps
        ),
        final_screenshot=screenshot_png(final) if final is not None else None,
        outcome=episode.outcome,
        stop_reason=rollout.stop_reason,
    )


def _human(episode: Episode) -> Part:
    review = Review.objects.filter(episode=episode).order_by("-created_at", "-id").first()
    if review is None:
        return Part("human", None, "waiting for a review", {})
    passed = review.verdict == Review.Verdict.ACCEPTED
    detail = f" (first wrong step {review.first_wrong_step})" if review.first_wrong_step else ""
    return Part(
        "human",
        passed,
        f"{review.reviewer} {review.verdict} it{detail}",
        {"review": review.pk, "first_wrong_step": review.first_wrong_step},
    )
