"""Building the model request for one step: ``prompt_build_ms``.

The step has five distinct 1920x1080 screenshots, the most a request carries: four earlier
steps and the current observation. Each is a busy screen (``tests.support.desktops.busy_wallpaper``:
gradients, panels and coloured text, with a different seed each) encoded as Tandem stores
observations, by the X11 controller's PNG encoder. Timed: ``OpenAIProposer.request_body``, the
exact bytes posted to the server, messages, base64 data URIs and JSON included. Screenshots are
sent as stored, not resized (the server resizes; see ``model_serving.uitars``), so this is the
whole cost on Tandem's side.
"""

import statistics
import time

from model_serving.proposers.base import HistoryStep, ProposalRequest
from model_serving.proposers.openai import OpenAIProposer
from tests.support.desktops import busy_wallpaper
from vm_pool.actions import Action, ActionType, Point, ScreenSize
from vm_pool.screen.capture import Frame, PngEncoder

SCREEN = ScreenSize(1920, 1080)
SCREENSHOTS = 5
WARMUP = 5
REPETITIONS = 60

GOALS = {"prompt_build_ms": "≤ 30"}


def _screenshots() -> list[bytes]:
    encoder = PngEncoder()
    pngs = []
    for seed in range(SCREENSHOTS):
        bgrx = busy_wallpaper(SCREEN, seed=seed).convert("RGBX").tobytes("raw", "BGRX")
        pngs.append(encoder.encode(Frame(SCREEN.width, SCREEN.height, bgrx)))
    return pngs


def _request(pngs: list[bytes]) -> ProposalRequest:
    history = tuple(
        HistoryStep(png, SCREEN, f"Step {index}: open the next menu.", action)
        for index, (png, action) in enumerate(
            zip(
                pngs[:-1],
                [
                    Action(ActionType.CLICK, Point(112, 34)),
                    Action(ActionType.TYPE, content="quarterly report\n"),
                    Action(ActionType.DRAG, Point(400, 300), Point(1500, 900)),
                    Action(ActionType.HOTKEY, keys=("ctrl", "s")),
                ],
                strict=True,
            )
        )
    )
    return ProposalRequest(
        instruction="Save the quarterly report as a PDF in the Documents folder.",
        platform="desktop",
        screenshot_png=pngs[-1],
        screen=SCREEN,
        history=history,
    )


def run() -> dict[str, float]:
    request = _request(_screenshots())
    proposer = OpenAIProposer("http://127.0.0.1:8001/v1", "ui-tars-1.5-7b")
    for _ in range(WARMUP):
        proposer.request_body(request)
    times = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        proposer.request_body(request)
        times.append((time.perf_counter() - started) * 1000)
    return {"prompt_build_ms": statistics.median(times)}
