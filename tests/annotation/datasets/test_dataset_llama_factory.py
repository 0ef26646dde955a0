"""The LLaMA-Factory writer (design §5): sharegpt files that follow LLaMA-Factory's documented
rules, written from episodes recorded through the live loop and from hand-built records;
byte-identical for the same records; streamed, one record at a time."""

import hashlib
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from annotation.datasets import pairs
from annotation.datasets.formats.llama_factory import write_llama_factory
from annotation.datasets.records import (
    Context,
    ErrorCorrectionPair,
    Filters,
    HistoryTurn,
    PostReflectionPair,
    SftSample,
    StepTarget,
)
from model_serving.uitars import SYSTEM_PROMPT, prompt_text
from tests.annotation.datasets.test_datasets_pairs import recorded  # noqa: F401  (a fixture)
from vm_pool.actions import ScreenSize

FHD = ScreenSize(1920, 1080)  # smart-resized to 1932x1092: screen (960,540) is model (966,546)
CLICK = {"type": "click", "point": [960, 540]}
TYPE = {"type": "type", "content": "hello\n"}
DONE = {"type": "finished", "content": "done"}
CLICK_TEXT = "click(start_box='<|box_start|>(966,546)<|box_end|>')"


def image_path(sha: str) -> str:
    return f"screenshots/{sha[:2]}/{sha}.png"


def validate(out_dir: Path) -> list[dict]:
    """LLaMA-Factory's documented rules for a sharegpt dataset (data/README.md and its sharegpt
    converter): the dataset_info entry, human/gpt turns alternating from a human turn, an SFT
    sample ending with a gpt turn, a DPO prompt ending with a human turn and its chosen and
    rejected answers from gpt, and as many ``<image>`` tags as images. Returns the samples."""
    info = json.loads((out_dir / "dataset_info.json").read_text())
    assert len(info) == 1
    (entry,) = info.values()
    assert entry["formatting"] == "sharegpt"
    ranking = entry.get("ranking", False)
    columns, tags = entry["columns"], entry["tags"]
    assert tags == {
        "role_tag": "from",
        "content_tag": "value",
        "user_tag": "human",
        "assistant_tag": "gpt",
    }
    expected_columns = {"messages", "images", "system"} | (
        {"chosen", "rejected"} if ranking else set()
    )
    assert set(columns) == expected_columns
    role, content = tags["role_tag"], tags["content_tag"]
    user, assistant = tags["user_tag"], tags["assistant_tag"]

    samples = json.loads((out_dir / entry["file_name"]).read_text())
    for sample in samples:
        messages = sample[columns["messages"]]
        assert messages
        for index, message in enumerate(messages):
            assert set(message) == {role, content}
            assert message[role] == (user if index % 2 == 0 else assistant), index
            assert isinstance(message[content], str)
        texts = [m[content] for m in messages]
        if ranking:
            assert len(messages) % 2 == 1  # the prompt ends with a human turn
            for answer in (sample[columns["chosen"]], sample[columns["rejected"]]):
                assert answer[role] == assistant
                assert answer[content] and "<image>" not in answer[content]
        else:
            assert len(messages) % 2 == 0  # ends with the gpt completion
            assert "chosen" not in sample and "rejected" not in sample
        images = sample[columns["images"]]
        assert images and all(isinstance(p, str) and p for p in images)
        assert sum(text.count("<image>") for text in texts) == len(images)
        assert sample[columns["system"]] == SYSTEM_PROMPT
    return samples


def check_manifest(out_dir: Path, manifest: dict, kind: str, samples: int) -> None:
    on_disk = json.loads((out_dir / "manifest.json").read_text())
    assert on_disk == manifest
    assert manifest["schema_version"] == 1
    assert manifest["kind"] == kind
    assert manifest["format"] == "llama_factory_sharegpt"
    assert manifest["counts"]["samples"] == samples
    assert set(manifest["files"]) == {"data.json", "dataset_info.json"}
    for name, about in manifest["files"].items():
        assert hashlib.sha256((out_dir / name).read_bytes()).hexdigest() == about["sha256"]


# --- hand-built records --------------------------------------------------------------------


def sha(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def turn(index: int, action: dict = TYPE) -> HistoryTurn:
    return HistoryTurn(index, "accepted", sha(index), FHD, f"Step {index}.", action, "unused")


def context(steps: int) -> Context:
    """The context of step ``steps``: ``steps - 1`` earlier steps, up to five screenshots."""
    window = range(max(1, steps - 4), steps + 1)
    return Context(
        instruction="Say hello",
        platform="desktop",
        history=tuple(turn(i, CLICK if i == 1 else TYPE) for i in range(1, steps)),
        screenshots=tuple(sha(i) for i in window),
        screen_sizes=(FHD,) * len(window),
    )


def target(thought: str, action: dict) -> StepTarget:
    return StepTarget(thought, action, "unused")


def test_sft_sample_follows_ui_tars_and_keeps_the_last_five_screenshots(tmp_path):
    records = [
        SftSample(1, 1, context(1), target("Click the box.", CLICK), "corrected"),
        SftSample(1, 7, context(7), target("All done.", DONE), "reflection"),
    ]
    manifest = write_llama_factory(iter(records), "sft", tmp_path, image_path)
    first, last = validate(tmp_path)
    check_manifest(tmp_path, manifest, "sft", 2)
    assert manifest["counts"] == {
        "samples": 2,
        "by_record_type": {"SftSample": 2},
        "images": 6,
    }
    assert manifest["coordinate_style"] == "uitars15"

    prompt = prompt_text("Say hello", "desktop")
    assert first == {
        "conversations": [
            {"from": "human", "value": prompt + "<image>"},
            {"from": "gpt", "value": f"Thought: Click the box.\nAction: {CLICK_TEXT}"},
        ],
        "images": [image_path(sha(1))],
        "system": SYSTEM_PROMPT,
    }
    # Step 7: steps 1 and 2 are text only (their screenshots are no longer sent), steps 3 to 6
    # and o7 each bring a screenshot.
    values = [m["value"] for m in last["conversations"]]
    assert values[0::2] == [prompt, "", "<image>", "<image>", "<image>", "<image>", "<image>"]
    assert values[1] == f"Thought: Step 1.\nAction: {CLICK_TEXT}"
    assert values[3] == "Thought: Step 2.\nAction: type(content='hello\\n')"
    assert values[-1] == "Thought: All done.\nAction: finished(content='done')"
    assert last["images"] == [image_path(sha(i)) for i in range(3, 8)]


def test_dpo_sample_ends_with_the_human_turn_and_carries_chosen_and_rejected(tmp_path):
    records = [
        ErrorCorrectionPair(1, 2, context(2), target("Type.", TYPE), target("Click.", CLICK)),
        PostReflectionPair(1, 3, context(3), target("Fix it.", DONE), target("Again.", TYPE)),
    ]
    manifest = write_llama_factory(
        (r for r in records), "dpo", tmp_path, image_path, filters={"project_id": 1}
    )
    first, second = validate(tmp_path)
    check_manifest(tmp_path, manifest, "dpo", 2)
    assert manifest["filters"] == {"project_id": 1}
    assert manifest["counts"]["by_record_type"] == {
        "ErrorCorrectionPair": 1,
        "PostReflectionPair": 1,
    }
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert info["tandem_dpo"]["ranking"] is True
    assert info["tandem_dpo"]["file_name"] == "data.json"
    assert first["chosen"] == {
        "from": "gpt",
        "value": "Thought: Type.\nAction: type(content='hello\\n')",
    }
    assert first["rejected"] == {"from": "gpt", "value": f"Thought: Click.\nAction: {CLICK_TEXT}"}
    assert first["conversations"][-1] == {"from": "human", "value": "<image>"}
    assert len(second["conversations"]) == 5 and second["images"] == [
        image_path(sha(i)) for i in (1, 2, 3)
    ]


def test_the_relative_coordinate_style_is_honoured(tmp_path):
    records = [SftSample(1, 1, context(1), target("Click.", CLICK), "corrected")]
    write_llama_factory(records, "sft", tmp_path, image_path, style="relative1000")
    (sample,) = validate(tmp_path)
    assert "(500,500)" in sample["conversations"][-1]["value"]


def test_wrong_records_and_stray_image_tags_are_refused(tmp_path):
    pair = ErrorCorrectionPair(1, 1, context(1), target("A.", TYPE), target("B.", CLICK))
    with pytest.raises(TypeError):
        write_llama_factory([pair], "sft", tmp_path, image_path)
    with pytest.raises(ValueError):
        write_llama_factory([pair], "ct", tmp_path, image_path)  # type: ignore[arg-type]
    sneaky = SftSample(1, 1, context(1), target("See <image> here.", TYPE), "corrected")
    with pytest.raises(ValueError, match="<image>"):
        write_llama_factory([sneaky], "sft", tmp_path, image_path)
    assert not any(p.name.startswith("data") for p in tmp_path.iterdir())  # nothing half-written


def test_same_records_give_byte_identical_files(tmp_path):
    records = [
        SftSample(1, i, context(i), target(f"Step {i}.", TYPE), "corrected") for i in (1, 4, 9)
    ]
    first = write_llama_factory(records, "sft", tmp_path / "a", image_path)
    second = write_llama_factory(list(records), "sft", tmp_path / "b", image_path)
    assert first == second
    for name in ("data.json", "dataset_info.json", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    check_manifest(tmp_path / "a", first, "sft", 3)


def test_records_are_written_one_at_a_time(tmp_path):
    count = 10_000
    pulled = 0

    def records() -> Iterator[SftSample]:
        nonlocal pulled
        for i in range(count):
            pulled += 1
            yield SftSample(i, 1, context(1), target(f"Record {i}.", CLICK), "corrected")

    tracemalloc.start()
    try:
        manifest = write_llama_factory(records(), "sft", tmp_path, image_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pulled == count and manifest["counts"]["samples"] == count
    size = (tmp_path / "data.json").stat().st_size
    assert size > 15_000_000  # each sample holds the ~1.5 kB prompt
    assert peak < 1_000_000, peak  # one record in memory, not the ~15 MB file
    assert len(json.loads((tmp_path / "data.json").read_text())) == count


def test_a_failing_source_leaves_no_data_file(tmp_path):
    def records() -> Iterator[SftSample]:
        yield SftSample(1, 1, context(1), target("Fine.", TYPE), "corrected")
        raise RuntimeError("the database went away")

    with pytest.raises(RuntimeError):
        write_llama_factory(records(), "sft", tmp_path, image_path)
    assert list(tmp_path.iterdir()) == []


# --- recorded episodes ---------------------------------------------------------------------


@pytest.mark.django_db
def test_recorded_episodes_give_valid_llama_factory_files(recorded, project, tmp_path):  # noqa: F811
    a, _, _ = recorded
    for kind, samples in (("sft", 4), ("dpo", 3)):
        out = tmp_path / kind
        records = pairs.iter_samples(Filters(project.pk), kind)
        manifest = write_llama_factory(records, kind, out, image_path)
        written = validate(out)
        check_manifest(out, manifest, kind, samples)
        assert len(written) == samples
    # The first pair: the model's click at (640,400) on the 1280x800 screen, which UI-TARS-1.5
    # sees as 1288x812, is written as its own (644,406), box tokens included.
    first_pair = json.loads((tmp_path / "dpo" / "data.json").read_text())[0]
    assert first_pair["rejected"]["value"] == (
        "Thought: Click the terminal.\nAction: click(start_box='<|box_start|>(644,406)<|box_end|>')"
    )
    # Step 6's context: step 1 is text only, steps 2 to 6 bring their screenshots.
    last_pair = json.loads((tmp_path / "dpo" / "data.json").read_text())[-1]
    shas = dict(a.steps.values_list("index", "observation__sha256"))
    assert last_pair["images"] == [image_path(shas[i]) for i in range(2, 7)]
    assert last_pair["conversations"][2] == {"from": "human", "value": "<image>"}
    assert "<image>" not in last_pair["conversations"][0]["value"]
