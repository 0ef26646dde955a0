"""TRL exports of episodes recorded through the live loop (the episodes of
``tests.annotation.datasets.test_datasets_pairs``): golden rows, and the real consumers reading them
— ``datasets.load_dataset``, then one SFT step through ``SFTTrainer`` and one DPO step through
``DPOTrainer`` on a tiny Qwen2.5-VL built locally (``model_serving.demo_model``), on the CPU."""

import warnings
from pathlib import Path

import datasets
import pytest
from datasets import Image, List
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

from annotation.datasets import exports
from annotation.models import Step
from backend.accounts.roles import Role
from model_serving.demo_model import tiny_model, tiny_processor
from model_serving.uitars import SYSTEM_PROMPT, prompt_text
from tests.annotation.datasets.test_datasets_pairs import (  # noqa: F401  (a fixture)
    INSTRUCTION,
    recorded,
)

pytestmark = pytest.mark.django_db


def text(role: str, value: str) -> dict:
    return {"role": role, "content": [{"type": "text", "text": value}]}


IMAGE = {"role": "user", "content": [{"type": "image", "text": None}]}


def answer(thought: str, action: str) -> dict:
    return text("assistant", f"Thought: {thought}\nAction: {action}")


@pytest.fixture
def exported(recorded, project, make_user, client_for, loop_settings, tmp_path):  # noqa: F811
    """Build the SFT, DPO and CT exports of the recorded episodes through the export job and
    download them over the API; return the folders, with the episodes."""
    loop_settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    client = client_for(make_user("erin", project, Role.ENGINEER))
    folders = {}
    for kind in ("sft", "dpo", "ct"):
        body = {"project": project.pk, "kind": kind, "format": "trl"}
        export_id = client.post("/api/exports/", body, format="json").json()["id"]
        exports.build_export(export_id)
        export = client.get(f"/api/exports/{export_id}/").json()
        assert export["status"] == "succeeded", export["error"]
        folder = tmp_path / "pulled" / kind
        for entry in export["files"]:
            path = folder / entry["name"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"".join(client.get(entry["download_url"]).streaming_content))
        folders[kind] = folder
    return folders, recorded


def load(folder: Path, decode: bool = True) -> datasets.Dataset:
    dataset = datasets.load_dataset(
        "parquet", data_files=str(folder / "data" / "*.parquet"), split="train"
    )
    if not decode:
        dataset = dataset.cast_column("images", List(Image(decode=False)))
    return dataset


def pngs(episode, indexes) -> list[bytes]:
    steps = Step.objects.select_related("observation").filter(episode=episode)
    files = {s.index: s.observation.file for s in steps}
    out = []
    for index in indexes:
        with files[index].open("rb") as stream:
            out.append(stream.read())
    return out


def test_recorded_episodes_give_golden_trl_rows(exported):
    folders, (a, b, _) = exported
    opening = [text("system", SYSTEM_PROMPT), text("user", prompt_text(INSTRUCTION, "desktop"))]
    one = answer("Type the first command.", "type(content='echo one\\n')")

    sft = load(folders["sft"], decode=False)
    assert [(r["episode_id"], r["step_index"], r["sample_kind"]) for r in sft] == [
        (a.pk, 2, "corrected"),
        (a.pk, 4, "reflection"),
        (a.pk, 5, "corrected"),
        (a.pk, 6, "corrected"),
    ]
    first = sft[0]
    assert first["prompt"] == [*opening, IMAGE, one, IMAGE]
    assert first["completion"] == [
        answer("Type the second command.", "type(content='echo two\\n')")
    ]
    assert [image["bytes"] for image in first["images"]] == pngs(a, [1, 2])

    dpo = load(folders["dpo"], decode=False)
    assert [(r["step_index"], r["sample_kind"]) for r in dpo] == [
        (2, "error_correction"),
        (4, "post_reflection"),
        (6, "error_correction"),
    ]
    # The model's click at (640,400) of the 1280x800 screen is UI-TARS-1.5's (644,406).
    click = "click(start_box='<|box_start|>(644,406)<|box_end|>')"
    assert dpo[0]["rejected"] == [answer("Click the terminal.", click)]
    assert dpo[0]["chosen"] == first["completion"]
    reflection = dpo[1]
    assert reflection["prompt"][-2] == answer(
        "Type the third command.", "type(content='echo wrong\\n')"
    )  # the kept error is in the context
    assert reflection["chosen"] == [
        answer("That was wrong; start a fresh prompt.", "hotkey(key='ctrl c')")
    ]
    # Step 6: step 1 is text only (UI-TARS sends no turn for its screenshot); 2-6 bring theirs.
    last = dpo[2]
    assert last["prompt"][:3] == [*opening, one]
    assert sum(m == IMAGE for m in last["prompt"]) == 5
    assert [image["bytes"] for image in last["images"]] == pngs(a, [2, 3, 4, 5, 6])

    (ct,) = load(folders["ct"], decode=False)
    assert ct["episode_id"] == b.pk and ct["outcome"] == "abandoned"
    assert ct["messages"] == [
        text("system", SYSTEM_PROMPT),
        text("user", prompt_text("Open the Reports folder", "desktop")),
        IMAGE,
        answer("Click the terminal.", click),
    ]
    assert [image["bytes"] for image in ct["images"]] == pngs(b, [1])


def test_trl_trains_one_sft_and_one_dpo_step_on_the_exports(exported, tmp_path):
    folders, _ = exported
    processor = tiny_processor()
    common = {
        "max_steps": 1,
        "per_device_train_batch_size": 2,
        "max_length": None,  # the default would cut image tokens
        "use_cpu": True,
        "report_to": [],
        "save_strategy": "no",
        "disable_tqdm": True,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sft = SFTTrainer(
            model=tiny_model(processor),
            args=SFTConfig(output_dir=str(tmp_path / "sft"), **common),
            train_dataset=load(folders["sft"]),
            processing_class=processor,
        )
        sft_result = sft.train()
        dpo = DPOTrainer(
            model=tiny_model(processor),
            ref_model=tiny_model(processor),
            args=DPOConfig(output_dir=str(tmp_path / "dpo"), **common),
            train_dataset=load(folders["dpo"]),
            processing_class=processor,
        )
        dpo_result = dpo.train()
    assert sft_result.global_step == 1 and sft_result.training_loss > 0
    assert dpo_result.global_step == 1 and dpo_result.training_loss > 0
    # The collator saw the screenshots: image patches went through the vision tower.
    batch = sft.data_collator([sft.train_dataset[0]])
    assert batch["pixel_values"].shape[0] > 0
    assert (
        int(
            (batch["input_ids"] == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")).sum()
        )
        > 0
    )
