"""UI-TARS's side of a step: the prompt and history it is given, and how its answer is read.

Prompts. The texts are UI-TARS-1.5's as published in the UI-TARS repository's
``codes/prompts.py``, to which the UI-TARS-1.5 README points (COMPUTER_USE for desktop and web
tasks, MOBILE_USE for Android), character for character, with ``{language}`` and
``{instruction}`` filled in, except for the action space: it lists exactly the actions the
project's platform accepts (``vm_pool``'s ``ALLOWED_ACTIONS``), so the model is offered every
action it may answer with and nothing it may not. The published texts lack ``call_user()``
(and MOBILE_USE ``wait()``), which the platform accepts and the model writes; those lines are
added as UI-TARS's own agents write them. The ``ui-tars`` package on PyPI does not ship the
prompts: its prompt module only has the Doubao variants, whose action space is written with
``<point>`` tags.

Messages, as UI-TARS-1.5's own inference code (the OSWorld agent) builds them: the system turn
"You are a helpful assistant.", a user turn with the prompt, then for each earlier step a user
turn with its screenshot and an assistant turn with its text, then a user turn with the current
screenshot. Only the last ``HISTORY_IMAGES`` screenshots, the current one included, are sent:
the user turns of older steps are dropped and their assistant turns kept, so the model always
reads the whole text history. Every content is a list of parts; a screenshot is an
``image_url`` part holding a PNG data URI.

Coordinates. A point is stored in screen pixels; the model speaks one of two conventions:

- ``uitars15``: absolute pixels on the *smart-resized* screenshot, the size Qwen2.5-VL's image
  processor scales every image to (sides multiples of 28, between ``MIN_PIXELS`` and
  ``MAX_PIXELS`` pixels, aspect ratio kept as closely as possible). A 1920x1080 screen is seen
  as 1932x1092, so the model's (966, 546) is the screen's (960, 540).
- ``relative1000``: UI-TARS-1.0's 0-1000 on each axis, whatever the size.

Conversion goes through exact integer arithmetic and rounds half up, both ways. A model point
that lands outside the screen is refused, never clamped; a screen point written for the model
stays on the model's image (the last pixel of a 2560-wide screen is 999 in 0-1000, not 1000).

Screenshots are sent as they were captured, not resized here. The server's image processor
smart-resizes every image itself (vLLM runs the model's own Hugging Face processor), so the
model sees exactly the pixels it saw in training, and its coordinates refer to
``smart_resize`` of the original size, which is what the conversion uses. Resizing here would
only add a second resampling, a decode and a re-encode; building a request is then just base64
of the stored PNG bytes. This assumes the server keeps the model's default ``min_pixels`` and
``max_pixels``.

History. The assistant turn of an earlier step is ``Thought: …\\nAction: …`` with the step's
*final* thought and action (what was executed, the annotator's when corrected), its points
converted to the model's convention and wrapped in ``<|box_start|>``/``<|box_end|>``: the
server strips those tokens from what the model writes, and UI-TARS's inference code adds them
back to the history.

Reading an answer. Box tokens are removed; the text is split into the thought and the action
call at the line that starts with ``Action:``. The thought is what follows ``Thought:``, or
for the older output formats the ``Reflection:`` and ``Action_Summary:`` parts joined by a
newline, or the ``Action_Summary:`` alone (the same sections ``ui-tars`` recognises). The
action call is read by ``vm_pool.actions.Action.from_text``, the project's one reader of
UI-TARS action text, in the model's coordinates; its points are then converted to screen
pixels and the action is validated for the platform and the screen.

``ui_tars.action_parser.parse_action_to_structure_output`` (``ui-tars`` 0.5.1) is not used to
read the call, because it mishandles text the model does write: it rewrites ``point=`` to
``start_box=`` and ``<point>x y</point>`` to ``(x,y)`` anywhere in the text, typed content and
thoughts included (``type(content='set point=5')`` would type ``set start_box=5``); it folds
text after the closing parenthesis into typed content; it fails on box tokens, on a raw newline
inside ``type`` content and on ``[x1,y1,x2,y2]`` boxes; it accepts any action name; and it
prints its errors to stdout. The tests check that on well-formed answers both readers agree,
and that ``smart_resize`` here is the package's (Qwen2.5-VL's) to the pixel.

An answer that cannot be used (no ``Action:``, a call that does not parse, an unknown action,
an action the platform does not have, a point off the screen) becomes a ``Candidate`` with no
action and an ``invalid_reason`` that says why: nothing in it can be executed.
"""

import base64
import dataclasses
import functools
import math
import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from model_serving.proposers.base import Candidate, ProposalRequest
from vm_pool.actions import (
    ALLOWED_ACTIONS,
    Action,
    ActionType,
    InvalidAction,
    Platform,
    Point,
    ScreenSize,
)
from vm_pool.screen.png import PNG_SIGNATURE

SYSTEM_PROMPT = "You are a helpful assistant."

# The action space as each prompt writes it: one line per action type, in the published order.
# A prompt lists exactly the types its platform accepts (``ALLOWED_ACTIONS``), no more, no less.
# The published COMPUTER_USE has no ``call_user()`` and MOBILE_USE neither ``wait()`` nor
# ``call_user()``, although the platform accepts them and the model writes them; their lines are
# the ones UI-TARS's own agents use (``call_user()`` as in OSWorld's UI-TARS agent and the
# UI-TARS desktop SDK, ``wait()`` as in COMPUTER_USE).
_WAIT = "wait() #Sleep for 5s and take a screenshot to check for any changes."
_FINISHED = (
    "finished(content='xxx') # Use escape characters \\', \\\", and \\n in content part to "
    "ensure we can parse the content in normal python string format."
)
_CALL_USER = (
    "call_user() # Submit the task and call the user when the task is unsolvable, or when you "
    "need the user's help."
)
COMPUTER_USE_ACTIONS: dict[ActionType, str] = {
    ActionType.CLICK: "click(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    ActionType.LEFT_DOUBLE: "left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    ActionType.RIGHT_SINGLE: "right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    ActionType.DRAG: (
        "drag(start_box='<|box_start|>(x1,y1)<|box_end|>', "
        "end_box='<|box_start|>(x3,y3)<|box_end|>')"
    ),
    ActionType.HOTKEY: "hotkey(key='')",
    ActionType.TYPE: (
        "type(content='xxx') # Use escape characters \\', \\\", and \\n in content part to "
        "ensure we can parse the content in normal python string format. If you want to submit "
        "your input, use \\n at the end of content. "
    ),
    ActionType.SCROLL: (
        "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', "
        "direction='down or up or right or left')"
    ),
    ActionType.WAIT: _WAIT,
    ActionType.FINISHED: _FINISHED,
    ActionType.CALL_USER: _CALL_USER,
}
MOBILE_USE_ACTIONS: dict[ActionType, str] = {
    ActionType.CLICK: "click(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    ActionType.LONG_PRESS: "long_press(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    ActionType.TYPE: (
        "type(content='') #If you want to submit your input, use \"\\n\" at the end of `content`."
    ),
    ActionType.SCROLL: COMPUTER_USE_ACTIONS[ActionType.SCROLL],
    ActionType.OPEN_APP: "open_app(app_name='')",
    ActionType.DRAG: COMPUTER_USE_ACTIONS[ActionType.DRAG],
    ActionType.PRESS_HOME: "press_home()",
    ActionType.PRESS_BACK: "press_back()",
    ActionType.WAIT: _WAIT,
    ActionType.FINISHED: _FINISHED,
    ActionType.CALL_USER: _CALL_USER,
}

COMPUTER_USE = """You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

{action_space}


## Note
- Use {language} in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.

## User Instruction
{instruction}
"""  # noqa: E501

MOBILE_USE = """You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task. 
## Output Format
```
Thought: ...
Action: ...
```
## Action Space

{action_space}


## Note
- Use {language} in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.

## User Instruction
{instruction}
"""  # noqa: E501, W291

HISTORY_IMAGES = 5  # screenshots sent with a request, the current one included

IMAGE_FACTOR = 28
MIN_PIXELS = 100 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
MAX_RATIO = 200
RELATIVE_SCALE = 1000

BOX_START = "<|box_start|>"
BOX_END = "<|box_end|>"


class CoordinateStyle(StrEnum):
    UITARS15 = "uitars15"  # absolute pixels on the smart-resized screenshot (Qwen2.5-VL)
    RELATIVE1000 = "relative1000"  # 0-1000 on each axis (UI-TARS-1.0, Qwen2-VL)


def smart_resize(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = MIN_PIXELS,
    max_pixels: int = MAX_PIXELS,
) -> tuple[int, int]:
    """The (height, width) Qwen2.5-VL's image processor scales an image to: both sides
    multiples of ``factor``, the pixel count within [min_pixels, max_pixels], the aspect ratio
    kept as closely as possible. The same float operations as Qwen's code, so that the result
    is the server's to the pixel."""
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(
            f"the aspect ratio of a {width}x{height} image is over {MAX_RATIO}, "
            "which Qwen2.5-VL refuses"
        )
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@functools.lru_cache(maxsize=256)  # a pure function, asked for every point of every step
def model_size(screen: ScreenSize, style: str) -> ScreenSize:
    """The extent of the model's coordinates for a screenshot of this screen."""
    if CoordinateStyle(style) is CoordinateStyle.RELATIVE1000:
        return ScreenSize(RELATIVE_SCALE, RELATIVE_SCALE)
    height, width = smart_resize(screen.height, screen.width)
    return ScreenSize(width, height)


def to_screen(point: Point, screen: ScreenSize, style: str) -> Point:
    """A point in the model's convention, in screen pixels (rounded half up)."""
    extent = model_size(screen, style)
    return Point(
        _scale(point.x, screen.width, extent.width), _scale(point.y, screen.height, extent.height)
    )


def to_model(point: Point, screen: ScreenSize, style: str) -> Point:
    """A point in screen pixels, in the model's convention (rounded half up, kept on the
    model's image)."""
    extent = model_size(screen, style)
    return Point(
        min(_scale(point.x, extent.width, screen.width), extent.width - 1),
        min(_scale(point.y, extent.height, screen.height), extent.height - 1),
    )


def _with_points(action: Action, convert: Callable[[Point], Point]) -> Action:
    return dataclasses.replace(
        action,
        point=None if action.point is None else convert(action.point),
        end=None if action.end is None else convert(action.end),
    )


def _scale(value: int, numerator: int, denominator: int) -> int:
    """``value * numerator / denominator`` rounded half up, in integers."""
    return (2 * value * numerator + denominator) // (2 * denominator)


# --- the request ---------------------------------------------------------------------------


def action_space_text(platform: str) -> str:
    """The prompt's action space for ``platform``: a line for each action type it accepts."""
    lines = MOBILE_USE_ACTIONS if Platform(platform) is Platform.ANDROID else COMPUTER_USE_ACTIONS
    allowed = ALLOWED_ACTIONS[Platform(platform)]
    missing = allowed - lines.keys()
    if missing:
        raise ValueError(f"no prompt line for {', '.join(sorted(missing))} on {platform}")
    return "\n".join(line for action, line in lines.items() if action in allowed)


def prompt_text(instruction: str, platform: str, language: str = "English") -> str:
    template = MOBILE_USE if Platform(platform) is Platform.ANDROID else COMPUTER_USE
    return template.format(
        language=language, instruction=instruction, action_space=action_space_text(platform)
    )


def action_text(action: Action, screen: ScreenSize, style: str) -> str:
    """The action as the model writes it: its points in the model's convention, each wrapped in
    box tokens, e.g. ``click(start_box='<|box_start|>(966,546)<|box_end|>')``."""

    def box(point: Point) -> str:
        converted = to_model(point, screen, style)
        return f"{BOX_START}({converted.x},{converted.y}){BOX_END}"

    return action.to_text(point_text=box)


def assistant_text(thought: str, action: Action, screen: ScreenSize, style: str) -> str:
    """An earlier step as the model would have written it, box tokens included."""
    return f"Thought: {thought}\nAction: {action_text(action, screen, style)}"


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def build_messages(
    request: ProposalRequest, style: str, image_url: Callable[[bytes], str] = data_uri
) -> list[dict[str, Any]]:
    """The chat messages for one step, in UI-TARS-1.5's order (see the module docstring).
    ``image_url`` gives the URL of each screenshot sent, in the order they appear."""

    def screenshot_turn(png: bytes) -> dict[str, Any]:
        if not png.startswith(PNG_SIGNATURE):
            raise ValueError("a screenshot must be PNG bytes")
        return {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": image_url(png)}}],
        }

    prompt = prompt_text(request.instruction, request.platform, request.language)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {"role": "user", "content": [{"type": "text", "text": prompt}]},
    ]
    first_with_image = len(request.history) - (HISTORY_IMAGES - 1)
    for index, step in enumerate(request.history):
        if index >= first_with_image:
            messages.append(screenshot_turn(step.screenshot_png))
        text = assistant_text(step.thought, step.action, step.screen, style)
        messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
    messages.append(screenshot_turn(request.screenshot_png))
    return messages


# --- the answer ----------------------------------------------------------------------------

_ACTION_LINE = re.compile(r"^[ \t]*Action:[ \t]*", re.MULTILINE)
_REFLECTION = re.compile(r"^Reflection:(?P<reflection>.*?)Action_Summary:(?P<summary>.*)$", re.S)


def split_response(text: str) -> tuple[str, str | None]:
    """The thought and the action call of a model's answer (box tokens already removed); the
    call is None when no line starts with ``Action:``."""
    match = _ACTION_LINE.search(text)
    head, call = (text, None) if match is None else (text[: match.start()], text[match.end() :])
    head = head.strip()
    reflection = _REFLECTION.match(head)
    if reflection is not None:
        thought = f"{reflection['reflection'].strip()}\n{reflection['summary'].strip()}"
    else:
        thought = head
        for label in ("Thought:", "Action_Summary:"):
            if head.startswith(label):
                thought = head[len(label) :].strip()
                break
    return thought, None if call is None else call.strip()


def parse_response(text: str, screen: ScreenSize, style: str, platform: str) -> Candidate:
    """Read a model's answer into a candidate step, in screen pixels. Never raises: an answer
    that cannot be executed is a candidate with no action and the reason."""
    cleaned = text.replace(BOX_START, "").replace(BOX_END, "").strip()
    thought, call = split_response(cleaned)
    if not cleaned:
        return Candidate(text, thought, None, "the model's answer is empty")
    if call is None:
        return Candidate(text, thought, None, "the answer has no line starting with 'Action:'")
    if not call:
        return Candidate(text, thought, None, "the 'Action:' line is empty")
    try:
        in_model = Action.from_text(call)
        action = _with_points(in_model, lambda point: to_screen(point, screen, style))
    except InvalidAction as error:
        return Candidate(text, thought, None, str(error))
    try:
        action.validate(platform, screen)
    except InvalidAction as error:
        reason = str(error)
        if any(p is not None and not screen.contains(p) for p in (action.point, action.end)):
            reason += f" (the model wrote {_model_points(in_model)} {_convention(screen, style)})"
        return Candidate(text, thought, None, reason)
    return Candidate(text, thought, action)


def _model_points(action: Action) -> str:
    points = [p for p in (action.point, action.end) if p is not None]
    return " and ".join(f"({p.x}, {p.y})" for p in points)


def _convention(screen: ScreenSize, style: str) -> str:
    if CoordinateStyle(style) is CoordinateStyle.RELATIVE1000:
        return "in 0-1000 coordinates"
    extent = model_size(screen, style)
    return f"on its {extent.width}x{extent.height} image"


# --- drafting the thought of a person's step ---------------------------------------------------

# Asked after the step's screenshot: the model writes the thought for the action a person took.
DRAFT_PROMPT = (
    "A person took the action below at this screen, on the way to the task. Write only the "
    "Thought that leads to it, as you would before acting (what you see, what is left to do, "
    "why this action), in one short paragraph, as `Thought: ...`.\nAction: {action}"
)


def draft_messages(
    request: ProposalRequest,
    action: Action,
    style: str,
    image_url: Callable[[bytes], str] = data_uri,
) -> list[dict[str, Any]]:
    """The chat messages asking for the thought of ``action`` taken at ``request``'s screen."""
    text = DRAFT_PROMPT.format(action=action_text(action, request.screen, style))
    return [
        *build_messages(request, style, image_url),
        {"role": "user", "content": [{"type": "text", "text": text}]},
    ]


def drafted_thought(text: str) -> str:
    """The thought of a drafting answer: after ``Thought:``, before any ``Action:`` line."""
    head, _ = split_response(text)
    return head.removeprefix("Thought:").strip()
