"""The manager's and the reviewer's pages in a real browser, on an episode that was recorded.

``check_manager_and_reviewer`` signs in as a project manager: the episode is on the progress
board, its model version is in the acceptance chart, and the episode viewer replays its steps
with screenshots and the proposal drawn against the final step. Then it signs in as a reviewer,
finds the episode in the review queue and accepts it; the Review row is checked in the
database. Screenshots of the pages go to ``shots_dir``. Any console error or uncaught page
error fails the check.
"""

from pathlib import Path

from playwright.sync_api import Browser, expect

from annotation.models import Episode, Review, Step
from tests.e2e.browser import CHROMIUM_ARGS, BrowserErrors, accessibility_problems, sign_in

__all__ = ["CHROMIUM_ARGS", "BrowserErrors", "check_manager_and_reviewer", "sign_in"]


def _step_with_both_points(episode: Episode) -> int:
    """A step whose proposal and final action both have a point on the screen, preferably
    two different points (a corrected click)."""
    both = []
    for step in Step.objects.filter(episode=episode).prefetch_related("proposals"):
        final = (step.final_action or {}).get("point")
        proposed = [(p.action or {}).get("point") for p in step.proposals.all()]
        if final and any(proposed):
            both.append((final in proposed, step.index))
    assert both, f"episode {episode.pk} has no step with a proposed and a final point"
    return min(both)[1]


def check_manager_and_reviewer(
    browser: Browser,
    base_url: str,
    episode_id: int,
    project_id: int,
    shots_dir: Path,
    manager: str,
    reviewer: str,
) -> None:
    episode = Episode.objects.select_related("task").get(pk=episode_id)
    steps = Step.objects.filter(episode=episode).count()
    shots_dir.mkdir(parents=True, exist_ok=True)

    context, page, errors = sign_in(
        browser, base_url, manager, f"/app/manage/projects/{project_id}/board"
    )
    # Managers review too: the review queue is in their navigation.
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Review", exact=True)).to_be_visible()
    board = page.get_by_test_id("board")
    submitted = board.locator("[data-status=submitted]")
    expect(submitted.get_by_role("link", name=f"Episode {episode_id}")).to_be_visible()
    page.screenshot(path=str(shots_dir / "manager-progress-board.png"), full_page=True)
    assert accessibility_problems(page) == []

    page.get_by_role("link", name="Charts").click()
    version = episode.model_version or "unknown"
    if version.startswith("ocr-"):  # the CPU baseline, named as such (src/ui/format.ts)
        version = f"baseline (OCR, tesseract {version.removeprefix('ocr-')})"
    acceptance = page.get_by_test_id("acceptance-table")
    expect(acceptance.get_by_role("cell", name=version, exact=True)).to_be_visible()
    expect(page.get_by_test_id("acceptance-chart").locator("circle").first).to_be_attached()
    throughput = page.get_by_test_id("throughput-table")
    expect(
        throughput.get_by_role("cell", name=episode.annotator.username, exact=True)
    ).to_be_visible()
    page.screenshot(path=str(shots_dir / "manager-charts.png"), full_page=True)
    assert accessibility_problems(page) == []

    # The annotators' scorecards: the episode's annotator, with the steps they decided.
    page.get_by_role("link", name="Quality").click()
    row = (
        page.get_by_test_id("scorecards")
        .get_by_role("row")
        .filter(has=page.get_by_role("cell", name=episode.annotator.username, exact=True))
    )
    decided = Step.objects.filter(
        episode__annotator=episode.annotator, episode__task__project_id=project_id
    ).exclude(decision__in=["", "auto", "demonstrated"])
    expect(row.get_by_role("cell").nth(2)).to_have_text(str(decided.count()))
    page.screenshot(path=str(shots_dir / "manager-quality.png"), full_page=True)
    assert accessibility_problems(page) == []

    page.get_by_role("link", name="Progress").click()
    page.get_by_test_id("board").get_by_role("link", name=f"Episode {episode_id}").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(episode.task.instruction)
    step_buttons = page.get_by_role("navigation", name="Steps").locator("button.step-button")
    expect(step_buttons).to_have_count(steps)
    index = _step_with_both_points(episode)
    step_buttons.nth(index - 1).click()
    shot = page.get_by_role("img", name=f"Screen before step {index}")
    expect(shot).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=shot.element_handle())
    expect(page.get_by_test_id("marker-proposal")).to_be_attached()
    expect(page.get_by_test_id("marker-final")).to_be_attached()
    step = Step.objects.get(episode=episode, index=index)
    expect(page.get_by_test_id("decision")).to_have_text(step.get_decision_display())
    expect(page.get_by_test_id("final-action-text")).to_contain_text(step.final_action["type"])
    expect(page.get_by_test_id("proposal-action-text")).to_be_visible()
    page.screenshot(path=str(shots_dir / "manager-episode-viewer.png"), full_page=True)
    assert accessibility_problems(page) == []
    errors.assert_none()
    context.close()

    context, page, errors = sign_in(browser, base_url, reviewer, "/app/review")
    expect(page.get_by_role("link", name=f"Episode {episode_id}", exact=True)).to_be_visible()
    page.screenshot(path=str(shots_dir / "reviewer-queue.png"), full_page=True)
    assert accessibility_problems(page) == []
    page.get_by_role("link", name=f"Episode {episode_id}", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(episode.task.instruction)
    page.get_by_label("Accept the episode").check()
    page.get_by_role("button", name="Accept episode").click()
    expect(page.get_by_test_id("latest-review")).to_contain_text(f"Accepted by {reviewer}")
    page.screenshot(path=str(shots_dir / "reviewer-accepted-episode.png"), full_page=True)
    page.get_by_role("link", name="Review queue").click()
    expect(page.get_by_role("table").or_(page.locator(".empty"))).to_be_visible()
    expect(page.get_by_role("link", name=f"Episode {episode_id}", exact=True)).to_have_count(0)
    errors.assert_none()
    context.close()
    assert Review.objects.filter(
        episode=episode, reviewer__username=reviewer, verdict=Review.Verdict.ACCEPTED
    ).exists()
