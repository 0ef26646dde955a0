"""What a decided step really is, whatever button the annotator pressed.

The rule: a ``corrected`` decision whose final thought **and** action equal the model proposal
it replaces is recorded as ``accepted``. The annotator changed nothing, so there is no error to
learn from: kept as a correction it would be an error-correction pair whose chosen equals its
rejected, an SFT "corrected" sample that teaches the model what it already said, and a step that
lowers the model's acceptance rate although the model got it right.

"Equal" is ``same_step``: the thoughts equal once leading and trailing whitespace is removed
(the loop strips the annotator's thought), the actions equal in their canonical JSON
(``Action.to_json`` of the parsed action, so key order, lists against tuples and default
arguments do not matter). An action that does not parse is only equal to the very same JSON.

The proposal compared with is the one the correction names (the client sends the rank of the
first valid proposal it showed); a correction that names none, or names an invalid one, stays a
correction. The pair builder (``annotation.datasets.pairs``) uses ``same_step`` too, so no dataset
pair ever has a chosen step equal to its rejected one.
"""

from typing import Any, Protocol

from annotation.models import Decision
from vm_pool.actions import Action, InvalidAction


class ProposedStep(Protocol):
    """What the rule reads of a proposal (``annotation.models.Proposal`` fits)."""

    @property
    def thought(self) -> str: ...

    @property
    def action(self) -> Any: ...


def canonical_action(action_json: Any) -> Any:
    """The action's canonical JSON, or the JSON as it is when it is not a valid action."""
    try:
        return Action.from_json(action_json).to_json()
    except InvalidAction:
        return action_json


def same_step(thought: str, action_json: Any, other_thought: str, other_action_json: Any) -> bool:
    """Whether two (thought, action) steps are the same step (see the module docstring)."""
    if action_json is None or other_action_json is None:
        return False
    return thought.strip() == other_thought.strip() and canonical_action(
        action_json
    ) == canonical_action(other_action_json)


def effective_decision(
    decision: str,
    final_thought: str,
    final_action_json: dict[str, Any],
    proposal: ProposedStep | None,
) -> str:
    """The decision to record: ``accepted`` for a correction equal to ``proposal``, else
    ``decision`` unchanged."""
    if decision != Decision.CORRECTED or proposal is None:
        return decision
    if same_step(final_thought, final_action_json, proposal.thought, proposal.action):
        return str(Decision.ACCEPTED)
    return decision
