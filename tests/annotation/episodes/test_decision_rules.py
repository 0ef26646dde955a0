"""A correction that changes nothing is an acceptance (``annotation.episodes.decision_rules``), and
the pair builder never writes a pair whose chosen step equals its rejected one."""

import pytest
from django.utils import timezone

from annotation.datasets import pairs as datasets
from annotation.episodes.decision_rules import canonical_action, effective_decision, same_step
from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    Proposal,
    Step,
    Task,
    TaskStatus,
)
from backend.accounts.roles import Role
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

CLICK = {"type": "click", "point": [640, 400]}
SCROLL = {"type": "scroll", "point": [640, 400], "direction": "down", "amount": 5}
SCROLL_AS_TYPED = {"type": "scroll", "point": [640, 400], "direction": "down"}  # default amount
ESCAPE = {"type": "hotkey", "keys": ["esc"]}
TYPE_A = {"type": "type", "content": "a"}
WAIT = {"type": "wait"}
PROPOSAL = Proposal(thought="Open the File menu.", action=CLICK)


# --- the rule --------------------------------------------------------------------------------


def test_a_correction_equal_to_the_proposal_is_recorded_as_accepted():
    assert effective_decision("corrected", "Open the File menu.", CLICK, PROPOSAL) == "accepted"


def test_whitespace_around_the_thought_and_the_form_of_the_action_do_not_make_a_correction():
    proposal = Proposal(thought="Scroll down. ", action=SCROLL)
    same_scroll = {"direction": "down", "point": (640, 400), "type": "scroll"}  # default amount
    assert effective_decision("corrected", "  Scroll down.\n", same_scroll, proposal) == "accepted"


@pytest.mark.parametrize(
    ("thought", "action"),
    [
        ("Open the Edit menu.", CLICK),  # another thought
        ("Open the File menu.", {"type": "click", "point": [641, 400]}),  # one pixel over
        ("Open the File menu.", {"type": "left_double", "point": [640, 400]}),  # another action
        ("open the file menu.", CLICK),  # the case is part of the thought
        ("", CLICK),  # the model's action with no thought of the annotator's
    ],
)
def test_a_correction_that_changes_anything_stays_a_correction(thought, action):
    assert effective_decision("corrected", thought, action, PROPOSAL) == "corrected"


def test_a_correction_that_replaces_no_or_an_invalid_proposal_stays_a_correction():
    invalid = Proposal(thought="", action=None, invalid_reason="no Action: line")
    assert effective_decision("corrected", "", {"type": "wait"}, None) == "corrected"
    assert effective_decision("corrected", "", {"type": "wait"}, invalid) == "corrected"


@pytest.mark.parametrize("decision", [Decision.ACCEPTED, Decision.ERROR_KEPT])
def test_other_decisions_are_recorded_as_they_are(decision):
    assert effective_decision(decision, "Open the File menu.", CLICK, PROPOSAL) == decision


def test_same_step_compares_actions_in_canonical_json_and_never_equals_no_action():
    assert canonical_action({"type": "hotkey", "keys": ("ctrl", "c")}) == {
        "type": "hotkey",
        "keys": ["ctrl", "c"],
    }
    assert canonical_action({"type": "teleport"}) == {"type": "teleport"}  # kept as it is
    assert same_step("a", {"type": "wait"}, "a ", {"type": "wait"})
    assert not same_step("a", None, "a", None)


# --- the pair builder ------------------------------------------------------------------------


@pytest.fixture
def recorded(make_user, project, settings, tmp_path):
    """One ended episode whose steps were stored before the rule existed: two corrections
    that change nothing but whitespace and the form of the action, and one real correction,
    then a kept error and a reflection equal to the model's own."""
    settings.MEDIA_ROOT = tmp_path
    ann = make_user("ann", project, Role.ANNOTATOR)
    task = Task.objects.create(
        project=project, external_id="t", instruction="Save", status=TaskStatus.SUBMITTED
    )
    episode = Episode.objects.create(
        task=task, annotator=ann, ended_at=timezone.now(), outcome=EpisodeOutcome.FINISHED
    )
    steps = [
        # (decision, final thought, final action, the model's thought, the model's action)
        ("corrected", "Open the File menu.", CLICK, "Open the File menu. ", CLICK),
        ("corrected", "Scroll down.", SCROLL_AS_TYPED, "Scroll down.", SCROLL),
        ("corrected", "Type the name.", TYPE_A, "Wait.", WAIT),
        ("error_kept", "Wait.", WAIT, "Wait.", WAIT),
        ("corrected", "Press escape.", ESCAPE, " Press escape.\n", ESCAPE),
    ]  # fmt: skip
    for index, (decision, thought, action, proposed_thought, proposed) in enumerate(steps, 1):
        step = Step.objects.create(
            episode=episode,
            index=index,
            observation=store_screenshot(solid_png(1280, 800, (index, 0, 0))),
        )
        proposal = Proposal.objects.create(
            step=step, raw_text="…", thought=proposed_thought, action=proposed
        )
        Step.objects.filter(pk=step.pk).update(
            decision=decision,
            chosen_proposal=proposal,
            final_thought=thought,
            final_action=action,
            decided_by=ann,
            decided_at=timezone.now(),
        )
    return episode


@pytest.mark.django_db
def test_the_pair_builder_never_pairs_a_step_with_itself(recorded, project):
    tally = datasets.Tally()
    pairs = list(datasets.iter_samples(datasets.Filters(project.pk), "dpo", tally=tally))
    assert [(type(p).__name__, p.step_index) for p in pairs] == [("ErrorCorrectionPair", 3)]
    assert all(p.chosen != p.rejected for p in pairs)
    assert tally.skipped[datasets.CORRECTION_EQUALS_PROPOSAL] == 2
    assert tally.skipped[datasets.REFLECTION_EQUALS_PROPOSAL] == 1
