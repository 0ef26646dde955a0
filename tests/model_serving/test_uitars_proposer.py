"""The UI-TARS proposer: prompts and history as UI-TARS-1.5 builds them, answers read into
actions in screen pixels, and the OpenAI-compatible client against a real HTTP server."""

import asyncio
import base64
import time

import pytest
from ui_tars.action_parser import parse_action_to_structure_output
from ui_tars.action_parser import smart_resize as ui_tars_smart_resize

from model_serving.proposers.base import (
    Candidate,
    HistoryStep,
    ModelUnavailable,
    ProposalRequest,
)
from model_serving.proposers.openai import OpenAIProposer
from model_serving.uitars import (
    COMPUTER_USE,
    MOBILE_USE,
    action_space_text,
    build_messages,
    parse_response,
    prompt_text,
    smart_resize,
    to_model,
    to_screen,
)
from tests.support.fake_model_server import Reply, serving
from tests.support.pngs import solid_png
from tests.support.services import free_port
from vm_pool.actions import (
    ALLOWED_ACTIONS,
    Action,
    ActionType,
    Direction,
    Platform,
    Point,
    ScreenSize,
)

HD = ScreenSize(1920, 1080)
INSTRUCTION = "Save the open document as report.txt on the desktop."


def answer(action_text: str, thought: str = "I will do the next step.") -> str:
    return f"Thought: {thought}\nAction: {action_text}"


def png(shade: int) -> bytes:
    return solid_png(8, 6, (shade, 255 - shade, 90))


def request_for(
    history: tuple[HistoryStep, ...] = (), candidates: int = 1, platform: str = "desktop"
) -> ProposalRequest:
    return ProposalRequest(
        instruction=INSTRUCTION,
        platform=platform,
        screenshot_png=png(250),
        screen=HD,
        history=history,
        candidates=candidates,
    )


def propose(proposer: OpenAIProposer, request: ProposalRequest, on_text=None):
    return asyncio.run(proposer.propose(request, on_text))


def fast_proposer(server, **options) -> OpenAIProposer:
    settings = {"timeout_s": 2, "connect_timeout_s": 1, "backoff_s": 0.01} | options
    return OpenAIProposer(server.base_url, server.model, **settings)


# --- coordinates -------------------------------------------------------------------------


# Worked by hand: each side is rounded to the nearest multiple of 28, the pixel count stays
# within 100·28·28 and 16384·28·28, so for these screens no further scaling happens.
#   800 / 28 = 28.57 → 29 · 28 = 812      1280 / 28 = 45.71 → 46 · 28 = 1288
#  1080 / 28 = 38.57 → 39 · 28 = 1092     1920 / 28 = 68.57 → 69 · 28 = 1932
#  1440 / 28 = 51.43 → 51 · 28 = 1428     2560 / 28 = 91.43 → 91 · 28 = 2548
@pytest.mark.parametrize(
    ("height", "width", "resized"),
    [(800, 1280, (812, 1288)), (1080, 1920, (1092, 1932)), (1440, 2560, (1428, 2548))],
)
def test_smart_resize_of_common_screens(height, width, resized):
    assert smart_resize(height, width) == resized


def test_smart_resize_scales_down_a_screen_over_the_pixel_limit():
    # 5120x2880 rounds to 5124x2884, over 16384·28·28; scaled by sqrt(5120·2880 / 12845056)
    # = 15/14 it is 4778.7x2688, floored to multiples of 28 in floats as Qwen does.
    height, width = smart_resize(2880, 5120)
    assert width * height <= 16384 * 28 * 28
    assert (height, width) == ui_tars_smart_resize(2880, 5120)


def test_smart_resize_is_the_one_ui_tars_and_qwen_use_for_every_size():
    sizes = [(h, w) for h in range(28, 4400, 97) for w in range(28, 7700, 89) if w / h <= 200]
    sizes += [(2, 300), (10, 10), (4320, 7680), (1080, 1920), (1920, 1080)]
    assert all(smart_resize(h, w) == ui_tars_smart_resize(h, w) for h, w in sizes)


# (screen, what the model wrote, the screen pixel), uitars15: x · width / smart-resized width.
# 1280x800: 100 · 1280 / 1288 = 99.38 → 99 and 200 · 800 / 812 = 197.04 → 197.
UITARS15_POINTS = [
    (ScreenSize(1280, 800), (644, 406), (640, 400)),
    (ScreenSize(1280, 800), (100, 200), (99, 197)),
    (HD, (966, 546), (960, 540)),
    (HD, (1000, 500), (994, 495)),  # 993.79 and 494.51
    (ScreenSize(2560, 1440), (1274, 714), (1280, 720)),
    (ScreenSize(2560, 1440), (2000, 1000), (2009, 1008)),  # 2009.42 and 1008.40
]
# relative1000: x · width / 1000.
RELATIVE_POINTS = [
    (ScreenSize(1280, 800), (500, 500), (640, 400)),
    (ScreenSize(1280, 800), (100, 200), (128, 160)),
    (HD, (500, 500), (960, 540)),
    (HD, (250, 750), (480, 810)),
    (ScreenSize(2560, 1440), (999, 999), (2557, 1439)),  # 2557.44 and 1438.56
    (ScreenSize(2560, 1440), (123, 456), (315, 657)),  # 314.88 and 656.64
]


@pytest.mark.parametrize(("screen", "model", "pixel"), UITARS15_POINTS)
def test_uitars15_click_lands_on_the_screen_pixel(screen, model, pixel):
    text = answer(f"click(start_box='({model[0]},{model[1]})')")
    candidate = parse_response(text, screen, "uitars15", "desktop")
    assert candidate.action == Action(ActionType.CLICK, Point(*pixel))
    assert candidate.is_valid


@pytest.mark.parametrize(("screen", "model", "pixel"), RELATIVE_POINTS)
def test_relative1000_click_lands_on_the_screen_pixel(screen, model, pixel):
    text = answer(f"click(start_box='({model[0]},{model[1]})')")
    candidate = parse_response(text, screen, "relative1000", "desktop")
    assert candidate.action == Action(ActionType.CLICK, Point(*pixel))


def test_screen_pixels_go_back_to_the_model_convention():
    assert to_model(Point(960, 540), HD, "uitars15") == Point(966, 546)
    assert to_model(Point(960, 540), HD, "relative1000") == Point(500, 500)
    assert to_model(Point(1919, 1079), HD, "uitars15") == Point(1931, 1091)  # 1930.99, 1090.99


@pytest.mark.parametrize("style", ["uitars15", "relative1000"])
@pytest.mark.parametrize("screen", [ScreenSize(1280, 800), HD, ScreenSize(2560, 1440)])
def test_every_model_point_on_the_image_lands_on_the_screen(style, screen):
    last = Point(screen.width - 1, screen.height - 1)
    far = to_model(last, screen, style)
    assert screen.contains(to_screen(far, screen, style))
    assert to_screen(Point(0, 0), screen, style) == Point(0, 0)


# --- reading answers ---------------------------------------------------------------------


def test_box_tokens_are_stripped_before_reading():
    text = answer("click(start_box='<|box_start|>(966,546)<|box_end|>')")
    candidate = parse_response(text, HD, "uitars15", "desktop")
    assert candidate.action == Action(ActionType.CLICK, Point(960, 540))
    assert candidate.raw_text == text


def test_drag_converts_both_ends():
    text = answer(
        "drag(start_box='<|box_start|>(966,546)<|box_end|>', end_box='(1000,500)')",
        thought="Drag the file onto the trash.",
    )
    candidate = parse_response(text, HD, "uitars15", "desktop")
    assert candidate.action == Action(ActionType.DRAG, Point(960, 540), Point(994, 495))
    assert candidate.thought == "Drag the file onto the trash."


def test_typed_content_keeps_its_submitting_newline():
    candidate = parse_response(answer("type(content='report.txt\\n')"), HD, "uitars15", "desktop")
    assert candidate.action == Action(ActionType.TYPE, content="report.txt\n")


def test_typed_content_that_looks_like_arguments_is_typed_as_written():
    text = answer("type(content='set point=5 and <point>1 2</point>')")
    candidate = parse_response(text, HD, "uitars15", "desktop")
    assert candidate.action is not None
    assert candidate.action.content == "set point=5 and <point>1 2</point>"


def test_hotkey_reads_the_keys():
    candidate = parse_response(answer("hotkey(key='ctrl s')"), HD, "uitars15", "desktop")
    assert candidate.action == Action(ActionType.HOTKEY, keys=("ctrl", "s"))


def test_finished_keeps_the_answer():
    text = answer("finished(content='The total is 42.')", thought="The task is done.")
    candidate = parse_response(text, HD, "uitars15", "desktop")
    assert candidate.action == Action(ActionType.FINISHED, content="The total is 42.")


def test_scroll_keeps_its_direction():
    candidate = parse_response(
        answer("scroll(start_box='(966,546)', direction='down')"), HD, "uitars15", "desktop"
    )
    assert candidate.action == Action(ActionType.SCROLL, Point(960, 540), direction=Direction.DOWN)


def test_a_box_is_read_as_its_centre():
    candidate = parse_response(
        answer("click(start_box='(900,500,1032,592)')"), HD, "uitars15", "desktop"
    )
    assert candidate.action == Action(ActionType.CLICK, Point(960, 540))


def test_reflection_and_action_summary_make_the_thought():
    text = (
        "Reflection: The dialog did not open.\nAction_Summary: Click the menu again.\n"
        "Action: click(start_box='(966,546)')"
    )
    candidate = parse_response(text, HD, "uitars15", "desktop")
    assert candidate.thought == "The dialog did not open.\nClick the menu again."
    assert candidate.action == Action(ActionType.CLICK, Point(960, 540))


def test_action_summary_alone_is_the_thought():
    text = "Action_Summary: Go back.\nAction: press_back()"
    candidate = parse_response(text, ScreenSize(1080, 2400), "uitars15", "android")
    assert candidate.thought == "Go back."
    assert candidate.action == Action(ActionType.PRESS_BACK)


# Answers that ui-tars reads correctly: both readers must agree on them.
WELL_FORMED = [
    "click(start_box='(1000,500)')",
    "right_single(start_box='(17,803)')",
    "drag(start_box='(100,200)', end_box='(1200,700)')",
    "scroll(start_box='(300,400)', direction='up')",
    "type(content='hello world\\n')",
    "hotkey(key='ctrl shift t')",
    "finished(content='done')",
    "wait()",
]


@pytest.mark.parametrize("action_text", WELL_FORMED)
@pytest.mark.parametrize("screen", [ScreenSize(1280, 800), HD, ScreenSize(2560, 1440)])
def test_well_formed_answers_read_as_ui_tars_reads_them(action_text, screen):
    text = answer(action_text, thought="Next.")
    ours = parse_response(text, screen, "uitars15", "desktop")
    [theirs] = parse_action_to_structure_output(
        text, 1000, screen.height, screen.width, model_type="qwen25vl"
    )
    assert ours.action is not None and ours.thought == theirs["thought"]
    assert ours.action.type == theirs["action_type"]
    inputs = theirs["action_inputs"]
    for name, point in (("start_box", ours.action.point), ("end_box", ours.action.end)):
        if point is not None:
            x, y, _, _ = eval(inputs[name])  # ui-tars hands back "[x, y, x, y]", relative
            assert (point.x, point.y) == (round(x * screen.width), round(y * screen.height))
    for name, value in (("content", ours.action.content), ("key", ours.action.keys)):
        if value is not None:
            assert (" ".join(value) if name == "key" else value) == inputs[name]


INVALID_ANSWERS = [
    ("", "empty"),
    ("I think I should click the button.", "no line starting with 'Action:'"),
    ("Thought: nothing to do\nAction:", "'Action:' line is empty"),
    ("#$%^&*(", "no line starting with 'Action:'"),
    (answer("@@@"), "not an action call"),
    (answer("teleport(start_box='(10,10)')"), "unknown action type 'teleport'"),
    (answer("click(start_box='(10,10))"), "not closed"),
    (answer("type(content='unbalanced)"), "not closed"),
    (answer("click(start_box='(10,10)')\n\nclick(start_box='(20,20)')"), "unexpected text"),
    (answer("click(start_box='ten, twenty')"), "not a point"),
    (answer("hotkey(key='ctrl banana')"), "unknown key name 'banana'"),
    (answer("long_press(start_box='(10,10)')"), "not available on desktop"),
]


@pytest.mark.parametrize(("text", "reason"), INVALID_ANSWERS)
def test_unusable_answer_is_an_invalid_candidate_with_the_reason(text, reason):
    candidate = parse_response(text, HD, "uitars15", "desktop")
    assert reason in candidate.invalid_reason
    assert candidate.raw_text == text


@pytest.mark.parametrize(("text", "reason"), INVALID_ANSWERS)
def test_invalid_candidate_has_no_action_to_execute(text, reason):
    candidate = parse_response(text, HD, "uitars15", "desktop")
    assert candidate.action is None
    assert not candidate.is_valid


@pytest.mark.parametrize(
    ("style", "action_text", "reason"),
    [
        ("uitars15", "click(start_box='(1932,10)')", "(1920, 10) is outside the 1920x1080 screen"),
        ("uitars15", "click(start_box='(10,1092)')", "on its 1932x1092 image"),
        ("uitars15", "drag(start_box='(10,10)', end_box='(99999,10)')", "end point"),
        ("relative1000", "click(start_box='(1000,10)')", "in 0-1000 coordinates"),
        ("uitars15", "click(start_box='(-5,10)')", "negative"),
    ],
)
def test_point_off_the_screen_is_invalid(style, action_text, reason):
    candidate = parse_response(answer(action_text), HD, style, "desktop")
    assert candidate.action is None
    assert reason in candidate.invalid_reason


def test_thought_is_kept_on_an_invalid_candidate():
    candidate = parse_response(answer("teleport()", thought="Go."), HD, "uitars15", "desktop")
    assert candidate == Candidate(
        answer("teleport()", thought="Go."), "Go.", None, "unknown action type 'teleport'"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Action: " + "(" * 500,
        "Action: click(start_box='(" + "9" * 400 + ",1)')",
        "Thought: 東京 🚀\nAction: type(content='\\')",
        "Action: click(start_box=<|box_start|>)",
        "\x00\x01Action:\x02",
        "Thought:\nAction: scroll(start_box='(1,1)', direction='sideways')",
    ],
)
def test_strange_answers_never_raise(text):
    candidate = parse_response(text, HD, "uitars15", "desktop")
    assert candidate.action is None and candidate.invalid_reason


# --- the request ---------------------------------------------------------------------------


STEP_ACTIONS = [
    (
        "Open the File menu.",
        Action(ActionType.CLICK, Point(960, 540)),
        "click(start_box='<|box_start|>(966,546)<|box_end|>')",
    ),
    (
        "Type the file name and submit.",
        Action(ActionType.TYPE, content="report.txt\n"),
        "type(content='report.txt\\n')",
    ),
    (
        "Save with the shortcut.",
        Action(ActionType.HOTKEY, keys=("ctrl", "s")),
        "hotkey(key='ctrl s')",
    ),
    (
        # 100·1932/1920 = 100.63, 200·1092/1080 = 202.22, 1000·1932/1920 = 1006.25, 505.56
        "Drag the file to the folder.",
        Action(ActionType.DRAG, Point(100, 200), Point(1000, 500)),
        "drag(start_box='<|box_start|>(101,202)<|box_end|>', "
        "end_box='<|box_start|>(1006,506)<|box_end|>')",
    ),
    (
        # 1919·1932/1920 = 1930.99, 1079·1092/1080 = 1090.99
        "Scroll down in the corner.",
        Action(ActionType.SCROLL, Point(1919, 1079), direction=Direction.DOWN),
        "scroll(start_box='<|box_start|>(1931,1091)<|box_end|>', direction='down')",
    ),
    (
        "Open the folder.",
        Action(ActionType.LEFT_DOUBLE, Point(0, 0)),
        "left_double(start_box='<|box_start|>(0,0)<|box_end|>')",
    ),
]


def history_of(steps: int) -> tuple[HistoryStep, ...]:
    return tuple(
        HistoryStep(png(10 * index), HD, thought, action)
        for index, (thought, action, _) in enumerate(STEP_ACTIONS[:steps])
    )


def data_uri(png_bytes: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes).decode()


def ui_tars_15_layout(history_responses: int, history_n: int = 5) -> list[tuple[str, str]]:
    """(role, part type) of each message as UI-TARS-1.5's OSWorld agent lays them out: its loop,
    transcribed; a history response gets its screenshot only while
    ``history_idx + history_n > len(history_responses)``."""
    layout = [("system", "text"), ("user", "text")]
    for history_idx in range(history_responses):
        if history_idx + history_n > history_responses:
            layout.append(("user", "image_url"))
        layout.append(("assistant", "text"))
    layout.append(("user", "image_url"))
    return layout


def test_request_for_step_seven_is_the_ui_tars_prompt_with_five_images():
    history = history_of(6)
    request = request_for(history)
    with serving() as server:
        server.script(Reply.text(answer("wait()")))
        propose(fast_proposer(server, temperature=0.0, max_tokens=400), request)
    [received] = server.chat_requests
    body = received.body

    def user_image(png_bytes: bytes) -> dict:
        return {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": data_uri(png_bytes)}}],
        }

    def assistant(index: int) -> dict:
        thought, _, action_text = STEP_ACTIONS[index]
        text = f"Thought: {thought}\nAction: {action_text}"
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}

    prompt = prompt_text(INSTRUCTION, "desktop")
    assert body["messages"] == [
        {"role": "system", "content": [{"type": "text", "text": "You are a helpful assistant."}]},
        {"role": "user", "content": [{"type": "text", "text": prompt}]},
        assistant(0),  # steps 1 and 2 keep their text, not their screenshot
        assistant(1),
        user_image(history[2].screenshot_png),
        assistant(2),
        user_image(history[3].screenshot_png),
        assistant(3),
        user_image(history[4].screenshot_png),
        assistant(4),
        user_image(history[5].screenshot_png),
        assistant(5),
        user_image(request.screenshot_png),
    ]
    layout = [(m["role"], m["content"][0]["type"]) for m in body["messages"]]
    assert layout == ui_tars_15_layout(6)
    images = [m for m in body["messages"] if m["content"][0]["type"] == "image_url"]
    assert len(images) == 5
    assert all(
        m["content"][0]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
        for m in images
    )
    assert body["model"] == server.model
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert (body["n"], body["temperature"], body["max_tokens"]) == (1, 0.0, 400)


def test_prompt_is_ui_tars_15_computer_use_with_language_and_instruction():
    prompt = build_messages(request_for(), "uitars15")[1]["content"][0]["text"]
    assert prompt.startswith(
        "You are a GUI agent. You are given a task and your action history, with screenshots. "
        "You need to perform the next action to complete the task.\n\n## Output Format\n```\n"
        "Thought: ...\nAction: ...\n```\n\n## Action Space\n\n"
        "click(start_box='<|box_start|>(x1,y1)<|box_end|>')\n"
    )
    assert "- Use English in `Thought` part.\n" in prompt
    assert prompt.endswith(f"## User Instruction\n{INSTRUCTION}\n")


def test_android_gets_the_mobile_prompt():
    messages = build_messages(request_for(platform="android"), "uitars15")
    prompt = messages[1]["content"][0]["text"]
    assert prompt == MOBILE_USE.format(
        language="English", instruction=INSTRUCTION, action_space=action_space_text("android")
    )
    assert "press_home()\npress_back()\n" in prompt


def offered_actions(prompt: str) -> list[str]:
    """The action names the prompt's action space lists, in its order."""
    section = prompt.split("## Action Space\n\n", 1)[1].split("\n\n", 1)[0]
    return [line.split("(", 1)[0] for line in section.splitlines()]


@pytest.mark.parametrize("platform", list(Platform))
def test_the_prompt_offers_exactly_the_actions_the_platform_accepts(platform):
    offered = offered_actions(prompt_text(INSTRUCTION, platform))
    assert len(offered) == len(set(offered))
    assert set(offered) == {str(action) for action in ALLOWED_ACTIONS[platform]}


def test_the_desktop_prompt_offers_call_user_after_finished():
    prompt = prompt_text(INSTRUCTION, "desktop")
    assert offered_actions(prompt)[-2:] == ["finished", "call_user"]
    assert (
        "\ncall_user() # Submit the task and call the user when the task is unsolvable, or when "
        "you need the user's help.\n\n\n## Note\n"
    ) in prompt
    assert COMPUTER_USE.count("{action_space}") == 1


def test_every_action_the_prompt_offers_reads_back_as_that_action():
    """What the model copies from the prompt's action space parses, on its platform."""
    examples = {
        "click": "click(start_box='(10,20)')",
        "left_double": "left_double(start_box='(10,20)')",
        "right_single": "right_single(start_box='(10,20)')",
        "long_press": "long_press(start_box='(10,20)')",
        "drag": "drag(start_box='(10,20)', end_box='(30,40)')",
        "scroll": "scroll(start_box='(10,20)', direction='down')",
        "type": "type(content='hi')",
        "hotkey": "hotkey(key='ctrl c')",
        "open_app": "open_app(app_name='Settings')",
        "wait": "wait()",
        "finished": "finished(content='')",
        "call_user": "call_user()",
        "press_home": "press_home()",
        "press_back": "press_back()",
    }
    for platform in Platform:
        for name in offered_actions(prompt_text(INSTRUCTION, platform)):
            text = f"Thought: go.\nAction: {examples[name]}"
            candidate = parse_response(text, HD, "uitars15", platform)
            assert candidate.is_valid and candidate.action.type == name, (platform, candidate)


@pytest.mark.parametrize("steps", [0, 1, 4, 5, 6])
def test_short_histories_keep_every_screenshot_up_to_five(steps):
    messages = build_messages(request_for(history_of(steps)), "uitars15")
    layout = [(m["role"], m["content"][0]["type"]) for m in messages]
    assert layout == ui_tars_15_layout(steps)
    images = sum(1 for role, kind in layout if kind == "image_url")
    assert images == min(steps + 1, 5)


def test_history_in_relative1000_uses_0_to_1000():
    step = HistoryStep(png(1), HD, "Click the middle.", Action(ActionType.CLICK, Point(960, 540)))
    messages = build_messages(request_for((step,)), "relative1000")
    assert messages[3]["content"][0]["text"] == (
        "Thought: Click the middle.\nAction: click(start_box='<|box_start|>(500,500)<|box_end|>')"
    )


def test_screenshot_that_is_not_png_is_refused():
    request = ProposalRequest(INSTRUCTION, "desktop", b"\xff\xd8\xff jpeg", HD)
    with pytest.raises(ValueError, match="PNG"):
        build_messages(request, "uitars15")


# --- the client against a real server ------------------------------------------------------


def test_streamed_answer_arrives_through_on_text_in_order():
    text = answer("click(start_box='(966,546)')", thought="Click the OK button in the dialog.")
    received: list[tuple[int, str]] = []

    async def on_text(index: int, delta: str) -> None:
        received.append((index, delta))

    with serving() as server:
        server.script(Reply.text(text, chunk_chars=4, chunk_delay_s=0.002))
        result = propose(fast_proposer(server), request_for(), on_text)
    assert len(received) == -(-len(text) // 4)  # pieces of 4 characters
    assert {index for index, _ in received} == {0}
    assert "".join(delta for _, delta in received) == text
    [candidate] = result.candidates
    assert candidate.raw_text == text
    assert candidate.action == Action(ActionType.CLICK, Point(960, 540))


def test_result_records_model_sampling_tokens_and_latency():
    with serving(model="ui-tars-1.5-7b") as server:
        server.script(Reply.text(answer("wait()"), chunk_chars=5, delay_s=0.15))
        proposer = fast_proposer(server, temperature=0.7, top_p=0.9, max_tokens=300)
        result = propose(proposer, request_for())
    assert result.model_name == "ui-tars-1.5-7b"
    assert result.model_version == "ui-tars-1.5-7b"  # the server's name for what it serves
    assert result.sampling == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 300, "n": 1}
    assert result.prompt_tokens == 1234
    assert result.completion_tokens == -(-len(answer("wait()")) // 5)
    assert result.latency_ms >= 150
    body = server.chat_requests[0].body
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.7, 0.9, 300)


def test_model_version_given_to_the_proposer_wins():
    with serving() as server:
        server.script(Reply.text(answer("wait()"), model="served-name"))
        proposer = fast_proposer(server, model_version="ui-tars-1.5-7b+lora-2024-06-01")
        result = propose(proposer, request_for())
    assert result.model_version == "ui-tars-1.5-7b+lora-2024-06-01"


def test_best_of_n_returns_n_candidates_routed_by_choice_index():
    texts = [
        answer("click(start_box='(966,546)')"),
        answer("hotkey(key='ctrl s')"),
        answer("nonsense"),
    ]
    received: dict[int, str] = {}

    async def on_text(index: int, delta: str) -> None:
        received[index] = received.get(index, "") + delta

    with serving() as server:
        server.script(Reply.text(*texts, chunk_chars=3))
        result = propose(fast_proposer(server, temperature=0.8), request_for(candidates=3), on_text)
    assert server.chat_requests[0].body["n"] == 3
    assert received == dict(enumerate(texts))
    assert [c.raw_text for c in result.candidates] == texts
    assert [c.is_valid for c in result.candidates] == [True, True, False]
    assert result.sampling["n"] == 3


def test_server_error_is_retried_and_the_retry_answers():
    with serving() as server:
        server.script(Reply.error(503, "loading"), Reply.text(answer("wait()")))
        result = propose(fast_proposer(server), request_for())
    assert len(server.chat_requests) == 2
    assert result.candidates[0].action == Action(ActionType.WAIT)


def test_server_errors_are_retried_then_the_model_is_unavailable():
    with serving() as server:
        server.script(*[Reply.error(500, "CUDA out of memory")] * 3)
        with pytest.raises(ModelUnavailable, match="HTTP 500: CUDA out of memory"):
            propose(fast_proposer(server, retries=2), request_for())
    assert len(server.chat_requests) == 3


def test_retries_wait_longer_each_time():
    with serving() as server:
        server.script(*[Reply.error(502)] * 3)
        started = time.perf_counter()
        with pytest.raises(ModelUnavailable):
            propose(fast_proposer(server, retries=2, backoff_s=0.1), request_for())
    assert time.perf_counter() - started >= 0.1 + 0.2


def test_hanging_server_times_out_is_retried_then_unavailable():
    with serving() as server:
        server.script(*[Reply.hanging()] * 2)
        started = time.perf_counter()
        with pytest.raises(ModelUnavailable, match="no complete answer within 0.3 s"):
            propose(fast_proposer(server, timeout_s=0.3, retries=1), request_for())
        elapsed = time.perf_counter() - started
    assert len(server.chat_requests) == 2
    assert 0.6 <= elapsed < 2


def test_slow_stream_past_the_timeout_is_cut():
    with serving() as server:
        slow = Reply.text(answer("wait()"), chunk_chars=1, chunk_delay_s=0.05)
        server.script(slow)
        with pytest.raises(ModelUnavailable, match="within 0.3 s"):
            propose(fast_proposer(server, timeout_s=0.3, retries=0), request_for())


def test_unreachable_server_is_unavailable():
    proposer = OpenAIProposer(
        f"http://127.0.0.1:{free_port()}/v1", "ui-tars", retries=1, backoff_s=0.01
    )
    with pytest.raises(ModelUnavailable, match="failed 2 times: ConnectError"):
        propose(proposer, request_for())


def test_client_error_is_not_retried():
    with serving() as server:
        server.script(Reply.error(400, "the prompt is longer than max-model-len"))
        with pytest.raises(ModelUnavailable, match="refused the request: HTTP 400: the prompt"):
            propose(fast_proposer(server, retries=2), request_for())
    assert len(server.chat_requests) == 1


def test_event_that_is_not_json_is_retried():
    with serving() as server:
        server.script(Reply.text(answer("wait()"), malformed=True), Reply.text(answer("wait()")))
        result = propose(fast_proposer(server), request_for())
    assert len(server.chat_requests) == 2
    assert result.candidates[0].is_valid


def test_stream_broken_after_text_was_shown_is_not_retried():
    received: list[str] = []

    async def on_text(index: int, delta: str) -> None:
        received.append(delta)

    with serving() as server:
        server.script(Reply.text(answer("wait()"), cut_after_chunks=4), Reply.text("unused"))
        with pytest.raises(ModelUnavailable, match="in the middle of its answer"):
            propose(fast_proposer(server), request_for(), on_text)
    assert len(server.chat_requests) == 1
    assert received  # what was shown stays shown; nothing else is spliced after it


def test_answer_cut_at_max_tokens_says_so():
    with serving() as server:
        server.script(Reply.text("Thought: I will first look at", finish_reason="length"))
        result = propose(fast_proposer(server, max_tokens=8), request_for())
    [candidate] = result.candidates
    assert candidate.action is None
    assert candidate.invalid_reason.startswith("the answer was cut off at max_tokens=8: ")


def test_api_key_is_sent_as_a_bearer_token():
    with serving() as server:
        server.script(Reply.text(answer("wait()")))
        propose(fast_proposer(server, api_key="sk-local"), request_for())
    assert server.chat_requests[0].headers["Authorization"] == "Bearer sk-local"


def test_concurrency_is_limited_per_endpoint():
    async def five_at_once(proposer: OpenAIProposer, other: OpenAIProposer) -> None:
        await asyncio.gather(
            *[proposer.propose(request_for()) for _ in range(3)],
            *[other.propose(request_for()) for _ in range(2)],
        )

    with serving() as server:
        server.default = Reply.text(answer("wait()"), delay_s=0.1)
        proposer = fast_proposer(server, concurrency=2)
        other = fast_proposer(server, concurrency=2, temperature=0.5)  # same endpoint, shared
        asyncio.run(five_at_once(proposer, other))
    assert len(server.chat_requests) == 5
    assert server.max_in_flight == 2


def test_fake_server_lists_its_model_and_is_healthy():
    import httpx

    with serving(model="ui-tars-1.5-7b") as server:
        models = httpx.get(f"{server.base_url}/models").json()
        health = httpx.get(f"http://127.0.0.1:{server.port}/health")
    assert [m["id"] for m in models["data"]] == ["ui-tars-1.5-7b"]
    assert health.status_code == 200


def test_unknown_coordinate_style_is_refused():
    with pytest.raises(ValueError, match="unknown coordinate style 'pixels'"):
        OpenAIProposer("http://127.0.0.1:8000/v1", "ui-tars", style="pixels")
