"""The baseline proposer on screenshots of real Xvfb desktops: it clicks the word the
instruction names (checked against xterm's character cells, and by pressing xmessage's
buttons), types quoted text after a click, saves and finishes, waits and then calls the user
when nothing matches, and labels everything it proposes as the baseline's."""

import asyncio
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from model_serving.proposers.base import (
    HistoryStep,
    ModelUnavailable,
    ProposalRequest,
    ProposalResult,
)
from model_serving.proposers.baseline import MAX_STEPS, BaselineProposer, Instruction
from tests.support import desktops
from tests.support.desktops import XDesktop
from vm_pool.actions import Action, ActionType, Point, ScreenSize
from vm_pool.x11.controller import X11Controller

x_desktop = desktops.x_desktop
desktop_factory = desktops.desktop_factory

SCREEN = ScreenSize(1280, 800)
COLUMNS, ROWS, BORDER = 40, 6, 8
# What the terminal shows: row -> text; every word starts at a known column.
TERMINAL_LINES = {1: "  Reports   Invoices   Archive", 3: "  Open the quarterly folder"}


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def __contains__(self, point: Point) -> bool:
        return self.left <= point.x <= self.right and self.top <= point.y <= self.bottom


@dataclass(frozen=True)
class TerminalScreen:
    """A screenshot of an xterm showing TERMINAL_LINES, and where each word is on it."""

    png: bytes
    words: dict[str, Box]


def screenshot(desktop: XDesktop) -> bytes:
    desktop.run("xdotool", "mousemove", "0", "0")  # keep the pointer off the text
    with X11Controller(desktop.display) as controller:
        return controller.observe().png


@pytest.fixture(scope="module")
def terminal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TerminalScreen]:
    home = tmp_path_factory.mktemp("home")
    with desktops.running_desktop(SCREEN.width, SCREEN.height, home) as desktop:
        text = "\\n".join(TERMINAL_LINES.get(row, "") for row in range(max(TERMINAL_LINES) + 1))
        desktop.launch(
            *("xterm", "-fa", "DejaVu Sans Mono", "-fs", "16", "-b", str(BORDER)),
            *("-geometry", f"{COLUMNS}x{ROWS}", "-e", "sh", "-c"),
            f"printf '\\033[?25l{text}'; sleep 600",  # the cursor hidden
        )
        window = desktop.wait_for_window("XTerm")
        cell_width = (window.width - 2 * BORDER) / COLUMNS
        cell_height = (window.height - 2 * BORDER) / ROWS
        words = {}
        for row, line in TERMINAL_LINES.items():
            for match in re.finditer(r"\w+", line):
                left = window.x + BORDER + match.start() * cell_width
                top = window.y + BORDER + row * cell_height
                right = left + len(match.group()) * cell_width
                words[match.group().lower()] = Box(left, top, right, top + cell_height)
        yield TerminalScreen(screenshot(desktop), words)


def propose(png: bytes, instruction: str, *history: Action, candidates: int = 1) -> ProposalResult:
    request = ProposalRequest(
        instruction=instruction,
        platform="desktop",
        screenshot_png=png,
        screen=SCREEN,
        history=tuple(HistoryStep(b"", SCREEN, "", action) for action in history),
        candidates=candidates,
    )
    return asyncio.run(BaselineProposer().propose(request))


def action_of(result: ProposalResult) -> Action:
    action = result.candidates[0].action
    assert action is not None
    return action


def click(point: Point) -> Action:
    return Action(ActionType.CLICK, point)


def test_click_lands_inside_the_word_the_instruction_names(terminal: TerminalScreen):
    action = action_of(propose(terminal.png, "Click Archive"))

    assert action.type is ActionType.CLICK
    assert action.point in terminal.words["archive"]


def test_a_word_in_a_sentence_is_found_too(terminal: TerminalScreen):
    action = action_of(propose(terminal.png, "Open the quarterly folder"))

    assert action.type is ActionType.CLICK
    assert action.point in terminal.words["quarterly"] or action.point in terminal.words["folder"]


def test_best_of_n_gives_distinct_click_targets_best_first(terminal: TerminalScreen):
    result = propose(terminal.png, "Open Invoices or Reports", candidates=2)

    points = [c.action.point for c in result.candidates if c.action is not None]
    assert len(points) == 2
    assert points[0] in terminal.words["invoices"]
    assert points[1] in terminal.words["reports"]


def test_best_of_n_repeats_a_single_proposal(terminal: TerminalScreen):
    result = propose(terminal.png, "Click Archive", candidates=3)

    assert len(result.candidates) == 3
    assert len({c.raw_text for c in result.candidates}) == 1


@pytest.mark.parametrize(("instruction", "exit_code"), [("Press Cancel", 1), ("Click Save", 0)])
def test_clicking_the_proposal_presses_the_named_button(
    x_desktop: XDesktop, instruction: str, exit_code: int
):
    dialog = x_desktop.launch("xmessage", "-buttons", "Save:0,Cancel:1", "Save the report?")
    x_desktop.wait_for_window("Xmessage")

    action = action_of(propose(screenshot(x_desktop), instruction))
    with X11Controller(x_desktop.display) as controller:
        controller.execute(action)

    assert dialog.wait(timeout=5) == exit_code


def test_quoted_text_is_typed_after_a_click(terminal: TerminalScreen):
    instruction = "Click the folder and type 'Q3 report, final' into it"
    action = action_of(propose(terminal.png, instruction, click(Point(10, 10))))

    assert action == Action(ActionType.TYPE, content="Q3 report, final")


def test_without_a_click_first_the_named_word_is_clicked_before_typing(terminal: TerminalScreen):
    action = action_of(propose(terminal.png, 'Click Archive and type "2024"'))

    assert action.type is ActionType.CLICK
    assert action.point in terminal.words["archive"]


def test_typed_text_is_saved_with_ctrl_s_then_the_task_is_finished(terminal: TerminalScreen):
    typed = Action(ActionType.TYPE, content="Q3")
    instruction = "Type 'Q3' in the quarterly folder and save"

    saving = action_of(propose(terminal.png, instruction, click(Point(10, 10)), typed))
    done = action_of(propose(terminal.png, instruction, click(Point(10, 10)), typed, saving))

    assert saving == Action(ActionType.HOTKEY, keys=("ctrl", "s"))
    assert done == Action(ActionType.FINISHED, content="")


def test_a_word_clicked_in_the_last_steps_is_not_clicked_again(terminal: TerminalScreen):
    archive = terminal.words["archive"]
    clicked = Point(
        int((archive.left + archive.right) / 2), int((archive.top + archive.bottom) / 2)
    )

    action = action_of(propose(terminal.png, "Click Archive", click(clicked)))

    assert action == Action(ActionType.FINISHED, content="")


def test_a_long_history_finishes(terminal: TerminalScreen):
    history = [Action(ActionType.WAIT)] * MAX_STEPS

    action = action_of(propose(terminal.png, "Click Archive", *history))

    assert action == Action(ActionType.FINISHED, content="")


def test_nothing_matching_waits_then_calls_the_user(terminal: TerminalScreen):
    wait = Action(ActionType.WAIT)
    instruction = "Click the zebra icon"

    first = propose(terminal.png, instruction)
    second = propose(terminal.png, instruction, wait)
    third = propose(terminal.png, instruction, wait, wait)

    assert action_of(first).type is ActionType.WAIT
    assert action_of(second).type is ActionType.WAIT
    assert action_of(third).type is ActionType.CALL_USER
    assert "no word of the instruction is on the screen" in first.candidates[0].thought


def test_a_blank_screen_waits_and_says_ocr_found_nothing(x_desktop: XDesktop):
    result = propose(screenshot(x_desktop), "Click Archive")

    assert action_of(result).type is ActionType.WAIT
    assert "OCR found no text" in result.candidates[0].thought


def test_an_unreadable_screenshot_waits_instead_of_raising():
    result = propose(b"not a png", "Click Archive")

    assert action_of(result).type is ActionType.WAIT
    assert "could not be read" in result.candidates[0].thought


def test_proposals_are_labelled_as_the_baseline(terminal: TerminalScreen):
    version = subprocess.run(["tesseract", "--version"], capture_output=True, text=True).stdout
    result = propose(terminal.png, "Click Archive")
    candidate = result.candidates[0]

    assert BaselineProposer.is_baseline and BaselineProposer.name == "baseline"
    assert result.model_name == "tandem-baseline"
    assert result.model_version == f"ocr-{version.split()[1]}"
    assert "tars" not in f"{result.model_name} {result.model_version}".lower()
    assert candidate.thought.startswith("Baseline: ")
    assert candidate.is_valid
    assert result.latency_ms > 0


@pytest.mark.parametrize(
    ("instruction", "history"),
    [
        ("Click Archive", ()),
        ("Type 'it's done\nnow' there", (click(Point(5, 5)),)),
        ("Type 'x' and save", (click(Point(5, 5)), Action(ActionType.TYPE, content="x"))),
        ("Click the zebra", ()),
        ("Click the zebra", (Action(ActionType.WAIT),) * 2),
        ("Click Archive", (Action(ActionType.WAIT),) * MAX_STEPS),
    ],
)
def test_raw_text_parses_back_to_the_same_thought_and_action(
    terminal: TerminalScreen, instruction: str, history: tuple[Action, ...]
):
    candidate = propose(terminal.png, instruction, *history).candidates[0]

    thought, action = re.fullmatch(r"Thought: (.*)\nAction: (.*)", candidate.raw_text).groups()
    assert thought == candidate.thought
    assert Action.from_text(action, platform="desktop", screen=SCREEN) == candidate.action


def test_the_text_streams_to_on_text_per_candidate(terminal: TerminalScreen):
    received: dict[int, str] = {}

    async def on_text(index: int, delta: str) -> None:
        received[index] = received.get(index, "") + delta

    request = ProposalRequest(
        "Open Invoices or Reports", "desktop", terminal.png, SCREEN, candidates=2
    )
    result = asyncio.run(BaselineProposer().propose(request, on_text))

    assert received == {i: c.raw_text for i, c in enumerate(result.candidates)}


def test_without_tesseract_the_model_is_unavailable(terminal: TerminalScreen):
    request = ProposalRequest("Click Archive", "desktop", terminal.png, SCREEN)

    with pytest.raises(ModelUnavailable, match="tesseract"):
        asyncio.run(BaselineProposer(tesseract="/nonexistent/tesseract").propose(request))


def test_quotes_are_text_to_type_and_apostrophes_are_not_quotes():
    instruction = Instruction.parse("""In the user's "Notes" field type 'don't panic' and save""")

    assert instruction.texts == ("Notes", "don't panic")
    assert instruction.keywords == ("user",)
    assert instruction.wants_save
