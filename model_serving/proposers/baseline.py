"""The baseline proposer: a CPU-only policy, so that Tandem runs end to end without a GPU.

It reads the screen with OCR and matches it against the instruction; it is no model, and says
so: its proposals carry ``model_name="tandem-baseline"``, ``model_version="ocr-<tesseract
version>"`` and thoughts that start with "Baseline:".

Reading the screen: the screenshot, in grey and upscaled twice when it is narrower than
2000 pixels (interface text is small for OCR), goes through ``tesseract`` in sparse-text mode
(``--psm 11``) with TSV output: words with their boxes, scaled back to screen pixels, and
confidences. Words below ``MIN_CONFIDENCE`` are dropped.

Reading the instruction: phrases in quotes ('…', "…", ‘…’ or “…”) are text to type; the other
words, lowercased and without stop words, are the words to look for on the screen. A screen
word matches an instruction word when they are equal or close (difflib ratio of at least
``MIN_SIMILARITY``), once lowercased and stripped of punctuation around them.

The rules, in order; the first that applies gives the action:

1. The history has ``MAX_STEPS`` steps: ``finished``.
2. A quoted text not typed yet (no ``type`` action in the history with that content), and the
   previous step clicked: ``type`` it.
3. Every quoted text typed, the instruction says to save, and no ``ctrl s`` since the last
   ``type``: ``hotkey ctrl s``.
4. Every quoted text typed (and saved when asked): ``finished``.
5. An instruction word on the screen that none of the last ``RECENT_STEPS`` steps clicked:
   ``click`` the centre of the best match: the most similar, then the one with the fewest
   words on its line (a button's label rather than the same word in a sentence), the
   earliest in the instruction, the most confident, the highest on the screen. When the
   instruction quotes text to type, "save" is left to rule 3 and not looked for on the screen.
6. A quoted text not typed yet and nothing to click first: ``type`` it where the focus is.
7. An instruction without quoted text, and an earlier step clicked: ``finished``.
8. Otherwise ``wait``, or ``call_user`` once the last ``WAITS_BEFORE_CALL_USER`` steps all
   waited. An unreadable or blank screenshot goes here too, with a thought saying so.

Best-of-N: a click proposal gives the top N distinct click targets, best first; when there
are fewer targets, or the action is not a click, the best proposal is repeated.
"""

import asyncio
import difflib
import io
import logging
import os
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from PIL import Image, UnidentifiedImageError

from model_serving.proposers.base import (
    Candidate,
    HistoryStep,
    ModelUnavailable,
    OnText,
    ProposalRequest,
    ProposalResult,
    Proposer,
)
from vm_pool.actions import ALLOWED_ACTIONS, Action, ActionType, Platform, Point, ScreenSize

logger = logging.getLogger(__name__)

MODEL_NAME = "tandem-baseline"
MIN_CONFIDENCE = 30.0
MIN_SIMILARITY = 0.85
UPSCALE_BELOW_WIDTH = 2000
MAX_STEPS = 15
RECENT_STEPS = 3
WAITS_BEFORE_CALL_USER = 2
OCR_TIMEOUT_S = 30.0

# Words that say what to do rather than what to look for; a word list reads best as a string.
STOP_WORDS = frozenset(
    """a an the and or but then to into onto on in at of for from with by as is are be it its
    this that these those there here please now first next after before up out all any my
    your me i you we click double right left tap press push hit select choose pick open
    type enter write input fill put go button field box""".split()  # noqa: SIM905
)
# Opening and closing quotes; a quote next to a letter is an apostrophe, not a quote.
QUOTED = re.compile(
    r"""(?<!\w)(?:'((?:[^']|(?<=\w)'(?=\w))+)'|"([^"]+)"|‘([^’]+)’|“([^”]+)”)(?!\w)"""
)
WORD = re.compile(r"\w+")
SAVE = re.compile(r"\bsav(?:e|es|ed|ing)\b")


@dataclass(frozen=True)
class ScreenWord:
    """A word read on the screen: its box in screen pixels, the OCR confidence (0-100) and how
    many words its line has."""

    text: str
    left: int
    top: int
    width: int
    height: int
    confidence: float
    line_words: int = 1

    @property
    def center(self) -> Point:
        return Point(self.left + self.width // 2, self.top + self.height // 2)

    def contains(self, point: Point, margin: int = 4) -> bool:
        return (
            self.left - margin <= point.x < self.left + self.width + margin
            and self.top - margin <= point.y < self.top + self.height + margin
        )


@dataclass(frozen=True)
class ScreenText:
    """What OCR read on a screenshot; ``problem`` says why nothing was read, if so."""

    words: tuple[ScreenWord, ...]
    elapsed_ms: int
    problem: str = ""


@dataclass(frozen=True)
class Instruction:
    """An instruction split into the texts to type and the words to look for on the screen."""

    texts: tuple[str, ...]
    keywords: tuple[str, ...]
    wants_save: bool

    @classmethod
    def parse(cls, instruction: str) -> "Instruction":
        texts = tuple(
            next(g for g in m.groups() if g is not None) for m in QUOTED.finditer(instruction)
        )
        rest = QUOTED.sub(" ", instruction).lower()
        wants_save = bool(SAVE.search(rest))
        keywords: list[str] = []
        for word in WORD.findall(rest):
            if len(word) < 2 or word in STOP_WORDS or word in keywords:
                continue
            if texts and SAVE.fullmatch(word):
                continue  # saving what was typed is rule 3's ctrl s, not a click
            keywords.append(word)
        return cls(texts, tuple(keywords), wants_save)


@dataclass(frozen=True)
class Proposal:
    thought: str
    action: Action

    @property
    def raw_text(self) -> str:
        return f"Thought: {self.thought}\nAction: {self.action.to_text()}"


class BaselineProposer(Proposer):
    name: ClassVar[str] = "baseline"
    is_baseline: ClassVar[bool] = True

    def __init__(self, *, tesseract: str = "tesseract") -> None:
        self.tesseract = tesseract

    @cached_property
    def model_version(self) -> str:
        """``ocr-`` and the tesseract version, e.g. ``ocr-5.3.0``."""
        try:
            done = subprocess.run(
                [self.tesseract, "--version"], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ModelUnavailable(f"the baseline needs tesseract: {error}") from error
        match = re.search(r"tesseract\s+v?(\S+)", done.stdout + done.stderr)
        if done.returncode != 0 or match is None:
            raise ModelUnavailable(f"{self.tesseract} --version did not give a version")
        return f"ocr-{match.group(1)}"

    async def propose(
        self, request: ProposalRequest, on_text: OnText | None = None
    ) -> ProposalResult:
        started = time.perf_counter()
        version = await asyncio.to_thread(lambda: self.model_version)
        screen_text = await asyncio.to_thread(
            self.read_screen, request.screenshot_png, request.screen
        )
        logger.info(
            "baseline OCR read %d words in %d ms", len(screen_text.words), screen_text.elapsed_ms
        )
        proposals = decide(request, screen_text)
        candidates = []
        for index, proposal in enumerate(proposals):
            if on_text is not None:
                await on_text(index, f"Thought: {proposal.thought}\n")
                await on_text(index, f"Action: {proposal.action.to_text()}")
            candidates.append(Candidate(proposal.raw_text, proposal.thought, proposal.action))
        return ProposalResult(
            candidates=tuple(candidates),
            model_name=MODEL_NAME,
            model_version=version,
            sampling={"min_similarity": MIN_SIMILARITY, "min_confidence": MIN_CONFIDENCE},
            latency_ms=round((time.perf_counter() - started) * 1000),
        )

    def read_screen(self, png: bytes, screen: ScreenSize) -> ScreenText:
        """OCR of a screenshot: its words in pixels of ``screen``. A screenshot that cannot be
        decoded gives no words and a ``problem``; a tesseract that cannot run raises
        ``ModelUnavailable``."""
        started = time.perf_counter()
        try:
            with Image.open(io.BytesIO(png)) as decoded:
                image = decoded.convert("L")
        except (UnidentifiedImageError, OSError, ValueError):
            return ScreenText((), 0, "the screenshot could not be read as an image")
        scale = 2 if image.width < UPSCALE_BELOW_WIDTH else 1
        to_screen_x = screen.width / (image.width * scale)
        to_screen_y = screen.height / (image.height * scale)
        if scale > 1:
            size = (image.width * scale, image.height * scale)
            image = image.resize(size, Image.Resampling.LANCZOS)
        buffer = io.BytesIO()
        image.save(buffer, "PNG", compress_level=1)
        # One thread: tesseract's OpenMP threads made a busy screenshot several times slower.
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        try:
            done = subprocess.run(
                [self.tesseract, "stdin", "stdout", "--psm", "11", "tsv"],
                input=buffer.getvalue(),
                capture_output=True,
                timeout=OCR_TIMEOUT_S,
                env=env,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ModelUnavailable(f"tesseract could not read the screenshot: {error}") from error
        if done.returncode != 0:
            message = done.stderr.decode(errors="replace").strip()[-300:]
            raise ModelUnavailable(f"tesseract failed ({done.returncode}): {message}")
        rows = [line.split("\t") for line in done.stdout.decode(errors="replace").splitlines()]
        rows = [f for f in rows[1:] if len(f) == 12 and f[0] == "5" and f[11].strip()]
        line_words = Counter(tuple(f[2:5]) for f in rows)  # block, paragraph, line
        words = []
        for fields in rows:
            confidence = float(fields[10])
            if confidence < MIN_CONFIDENCE:
                continue
            left, top, width, height = (int(v) for v in fields[6:10])
            words.append(
                ScreenWord(
                    text=fields[11].strip(),
                    left=round(left * to_screen_x),
                    top=round(top * to_screen_y),
                    width=max(1, round(width * to_screen_x)),
                    height=max(1, round(height * to_screen_y)),
                    confidence=confidence,
                    line_words=line_words[tuple(fields[2:5])],
                )
            )
        elapsed_ms = round((time.perf_counter() - started) * 1000)
        problem = "" if words else "OCR found no text on the screen"
        return ScreenText(tuple(words), elapsed_ms, problem)


def decide(request: ProposalRequest, screen_text: ScreenText) -> list[Proposal]:
    """The baseline's rules (see the module docstring): one proposal per candidate asked for."""
    instruction = Instruction.parse(request.instruction)
    history = request.history
    actions = [step.action for step in history]
    pending = [text for text in instruction.texts if not _typed(text, actions)]
    last = actions[-1] if actions else None
    clicked_last = last is not None and last.type in (ActionType.CLICK, ActionType.LEFT_DOUBLE)
    count = max(1, request.candidates)

    def single(thought: str, action: Action) -> list[Proposal]:
        return [Proposal(f"Baseline: {thought}", action)] * count

    if len(history) >= MAX_STEPS:
        return single(
            f"{len(history)} steps taken; the baseline stops here.",
            Action(ActionType.FINISHED, content=""),
        )
    if pending and clicked_last:
        return single(
            f"The previous step clicked a field, so I type {pending[0]!r}.",
            Action(ActionType.TYPE, content=pending[0]),
        )
    if instruction.texts and not pending:
        if instruction.wants_save and not _saved(actions) and _can_hotkey(request.platform):
            return single(
                "The text is typed and the instruction says to save: ctrl s.",
                Action(ActionType.HOTKEY, keys=("ctrl", "s")),
            )
        return single(
            "Every quoted text is typed" + (" and saved" if instruction.wants_save else "") + ".",
            Action(ActionType.FINISHED, content=""),
        )

    targets = _click_targets(instruction.keywords, screen_text.words, history)
    if targets:
        proposals = [
            Proposal(
                f"Baseline: {word.text!r} on the screen matches {keyword!r} in the instruction;"
                f" I click it.",
                Action(ActionType.CLICK, word.center),
            )
            for keyword, word in targets[:count]
        ]
        return proposals + [proposals[0]] * (count - len(proposals))
    if pending:
        return single(
            f"Nothing of the instruction to click first; I type {pending[0]!r} where the focus is.",
            Action(ActionType.TYPE, content=pending[0]),
        )
    if not instruction.texts and any(a.type is ActionType.CLICK for a in actions):
        return single(
            "What the instruction names has been clicked and nothing else of it is on the screen.",
            Action(ActionType.FINISHED, content=""),
        )

    reason = screen_text.problem or "no word of the instruction is on the screen"
    waits = 0
    for action in reversed(actions):
        if action.type is not ActionType.WAIT:
            break
        waits += 1
    if waits >= WAITS_BEFORE_CALL_USER:
        return single(
            f"{reason}, after {waits} waits; I ask for help.", Action(ActionType.CALL_USER)
        )
    return single(f"{reason}; I wait for the screen to change.", Action(ActionType.WAIT))


def _click_targets(
    keywords: tuple[str, ...], words: tuple[ScreenWord, ...], history: tuple[HistoryStep, ...]
) -> list[tuple[str, ScreenWord]]:
    """Screen words that match an instruction word and were not clicked in the last steps, one
    per word, best first."""
    recent = [
        step.action.point
        for step in history[-RECENT_STEPS:]
        if step.action.type in (ActionType.CLICK, ActionType.LEFT_DOUBLE)
        and step.action.point is not None
    ]
    scored = []
    for word in words:
        text = word.text.lower().strip("()[]{}<>.,:;!?'\"`*-_=|")
        if len(text) < 2 or any(word.contains(point) for point in recent):
            continue
        for rank, keyword in enumerate(keywords):
            similarity = difflib.SequenceMatcher(None, keyword, text).ratio()
            if similarity >= MIN_SIMILARITY:
                key = (-similarity, word.line_words, rank, -word.confidence, word.top, word.left)
                scored.append((key, keyword, word))
    scored.sort(key=lambda item: item[0])
    targets: dict[ScreenWord, str] = {}
    for _, keyword, word in scored:
        targets.setdefault(word, keyword)
    return [(keyword, word) for word, keyword in targets.items()]


def _typed(text: str, actions: list[Action]) -> bool:
    return any(
        a.type is ActionType.TYPE and (a.content or "").rstrip("\n") == text for a in actions
    )


def _saved(actions: list[Action]) -> bool:
    """A ctrl s after the last type action."""
    for action in reversed(actions):
        if action.type is ActionType.TYPE:
            return False
        if action.type is ActionType.HOTKEY and action.keys == ("ctrl", "s"):
            return True
    return False


def _can_hotkey(platform: str) -> bool:
    try:
        return ActionType.HOTKEY in ALLOWED_ACTIONS[Platform(platform)]
    except ValueError:
        return False
