"""Readers of what applications answered: the program most video types open with."""

from collections import Counter
from typing import Any

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.readers.base import Reader

ANSWERS = 1_000  # the getter asks about a hundred types


def most_common_program(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    """From ``xdg-mime query default``'s answers, each ended by a NUL: the answer given most
    often, as it was printed (with its newline), the first met on a tie; ``unknown`` when every
    answer was empty (OSWorld's ``default_video_player``)."""
    answers = (text or "").split("\0")[:-1]
    if len(answers) > ANSWERS:
        raise LimitHit("answers", f"{len(answers)} answers (at most {ANSWERS})")
    programs = [answer for answer in answers if answer]
    if not programs:
        return "unknown"
    return Counter(programs).most_common(1)[0][0]


READERS: dict[str, Reader] = {
    "most_common_program": most_common_program,
}
