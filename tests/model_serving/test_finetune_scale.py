"""Fine-tuning at real scale, checked on the CPU with the tiny Qwen2.5-VL: the
defaults that fit one 80 GB card, the frozen vision tower, rows measured against
``max_length`` and the cost shown before a job starts, the dataset kept in the job's folder
and the loss curve appended."""

import json
import statistics

import datasets
import pytest
import torch
from django.core.files.storage import default_storage

from model_serving import finetune
from model_serving.models import FineTuneJob
from model_serving.training import cost, lengths, trainer, window_attention
from model_serving.training.spec import Hyperparameters, hyperparameters
from model_serving.training.vision import FrozenVisionTower, vision_tower
from tests.support.finetune_data import LORA
from tests.support.finetune_data import job_body as body

pytestmark = pytest.mark.django_db


# --- defaults -------------------------------------------------------------------------------


def test_the_default_hyperparameters_checkpoint_gradients_without_reentrant_autograd(tmp_path):
    hp = hyperparameters(None)
    assert hp.gradient_checkpointing is True
    for kind in ("sft", "dpo"):
        arguments = trainer._arguments(kind, hp, tmp_path)
        assert arguments.gradient_checkpointing is True
        assert arguments.gradient_checkpointing_kwargs == {"use_reentrant": False}
        assert (arguments.save_strategy, arguments.save_steps) == ("steps", hp.checkpoint_steps)
    assert trainer.attention() == "sdpa"  # no flash-attention on a CPU


def test_after_loading_no_vision_tower_parameter_requires_a_gradient(base_model):
    model = trainer.load_model(str(base_model), Hyperparameters())
    FrozenVisionTower.install(model)
    tower = vision_tower(model)
    assert [n for n, p in tower.named_parameters() if p.requires_grad] == []
    assert any(p.requires_grad for n, p in model.named_parameters() if "visual" not in n)


def test_a_training_step_builds_no_graph_through_the_vision_tower(exports, base_model):
    sft, dpo, client = exports
    seen: list[tuple[str, bool]] = []

    def record(module, inputs, output):
        name = type(module).__name__
        if name.startswith("Qwen2_5_Vision") or name == "Qwen2_5_VLPatchMerger":
            tensors = [output] if isinstance(output, torch.Tensor) else [output.pooler_output]
            seen.extend((name, t.requires_grad or t.grad_fn is not None) for t in tensors)

    created = client.post("/api/finetune-jobs/", body([sft, dpo], base_model), format="json")
    hook = torch.nn.modules.module.register_module_forward_hook(record)
    try:
        assert finetune.run_job(created.json()["id"]) == "succeeded"
    finally:
        hook.remove()

    # The tower ran, inside and out, and nothing it produced is part of an autograd graph.
    assert {name for name, _ in seen} >= {
        "Qwen2_5_VisionTransformerPretrainedModel",
        "Qwen2_5_VisionPatchEmbed",
        "Qwen2_5_VLPatchMerger",
    }
    assert [entry for entry in seen if entry[1]] == []


def test_each_distinct_screenshot_goes_through_the_tower_once_in_a_job(exports, base_model):
    sft, dpo, client = exports
    created = client.post("/api/finetune-jobs/", body([sft, dpo], base_model), format="json")
    assert finetune.run_job(created.json()["id"]) == "succeeded"
    job = FineTuneJob.objects.get(pk=created.json()["id"])
    with default_storage.open(f"{job.artifacts_location}/adapter/tandem_training.json") as f:
        stages = json.load(f)["stages"]

    # Counts since training began: after SFT, then after DPO. The tower is the same in both
    # stages (LoRA leaves it alone), so its outputs stay cached from one to the next: a DPO
    # step asks for each prompt image twice (policy and reference: the pair is packed) and
    # encodes only what SFT did not meet.
    sft_counts, dpo_counts = stages[0]["vision_tower"], stages[1]["vision_tower"]
    assert 0 < sft_counts["encoded"] < sft_counts["asked"]
    asked = dpo_counts["asked"] - sft_counts["asked"]
    encoded = dpo_counts["encoded"] - sft_counts["encoded"]
    assert asked > 0 and asked >= 2 * encoded
    distinct = set()
    for export in (sft, dpo):
        rows = datasets.load_dataset(
            "parquet",
            data_files=default_storage.path(f"{export.location}data/*.parquet"),
            split="train",
        )
        distinct |= {image.tobytes() for row in rows for image in row["images"]}
    assert dpo_counts["encoded"] <= len(distinct)


def test_the_batched_window_attention_gives_the_towers_own_output(base_model, monkeypatch):
    """Windows of each size attended in one call give what transformers' one call a window
    gives, on images whose right and bottom edges cut windows short (three window sizes)."""
    model = trainer.load_model(str(base_model), Hyperparameters())
    tower = vision_tower(model)
    torch.manual_seed(7)
    # (t, h, w) patch grids: 12×20 and 10×6 cut the 56 px (4×4 patch) windows at the edges.
    grid = torch.tensor([[1, 12, 20], [1, 10, 6]])
    channels = 3 * 2 * 14 * 14  # RGB × temporal patch × patch area
    pixels = torch.randn(int(grid.prod(dim=1).sum()), channels)
    with torch.no_grad():
        own = tower(pixels, grid).pooler_output
    wrapper = FrozenVisionTower.install(model)
    calls = []
    sdpa = window_attention.F.scaled_dot_product_attention
    monkeypatch.setattr(
        window_attention.F,
        "scaled_dot_product_attention",
        lambda q, *rest, **kw: calls.append(tuple(q.shape)) or sdpa(q, *rest, **kw),
    )
    with torch.no_grad():
        batched = tower(pixels, grid).pooler_output

    assert batched.shape == own.shape
    assert torch.allclose(batched, own, atol=1e-5, rtol=1e-4)
    # Block 0 (windows): 21 windows of three lengths, three calls; block 1 (whole images):
    # two images of two lengths, two calls. transformers' own way makes 23.
    assert sorted(shape[2] for shape in calls) == [4, 8, 16, 60, 240]
    assert sum(shape[0] for shape in calls[:3]) == 21
    # Lengths of 0 (repeated boundaries) are skipped.
    groups = wrapper.windows.of(torch.tensor([0, 16, 32, 40, 56, 64, 64]))
    assert [tuple(index.shape) for index in groups] == [(2, 8), (3, 16)]


# --- lengths and cost, over the API ---------------------------------------------------------


def test_the_length_the_api_counts_is_the_length_the_processor_makes(exports, base_model):
    sft, dpo, _ = exports
    processor = trainer.load_processor(str(base_model))
    counter = lengths.TokenCounter.for_base(str(base_model))
    assert counter.exact
    rows = datasets.load_dataset(
        "parquet", data_files=default_storage.path(f"{sft.location}data/*.parquet"), split="train"
    )
    for row in rows:
        text = processor.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
        made = processor(text=[text], images=row["images"], return_tensors="pt")
        raw = row | {"images": [{"bytes": _png(image)} for image in row["images"]]}
        assert counter.row_tokens(raw, "sft") == made["input_ids"].shape[1]


def _png(image) -> bytes:
    import io  # the test's own PIL round trip

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_the_estimate_shows_rows_tokens_and_what_the_job_costs_on_the_measured_card(
    exports, base_model, tmp_path
):
    sft, dpo, client = exports
    response = client.post(
        "/api/finetune-jobs/estimate/", body([sft, dpo], base_model), format="json"
    )
    assert response.status_code == 200, response.json()
    tiny = response.json()
    assert [s["kind"] for s in tiny["stages"]] == ["sft", "dpo"]
    assert tiny["stages"][0]["rows"] == sft.counts["samples"]
    tokens = tiny["stages"][0]["tokens_per_row"]
    assert 0 < tokens["min"] <= tokens["median"] <= tokens["max"]
    assert tiny["text_tokens"] == "counted" and tiny["too_long"] == []
    # The tiny demo model has no measured figures: no GPU estimate, and why.
    assert tiny["gpu"] is None and "no measured figures" in tiny["reason"]

    # A base whose config is Qwen2.5-VL-7B's is estimated from the 7B measurement.
    seven = tmp_path / "seven-b"
    seven.mkdir()
    for name in ("tokenizer.json", "processor_config.json"):
        (seven / name).write_bytes((base_model / name).read_bytes())
    (seven / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 3584}}))
    steps = {"max_steps": 100, "batch_size": 1, "gradient_accumulation_steps": 8}
    estimate = client.post(
        "/api/finetune-jobs/estimate/", body([sft], seven, **steps), format="json"
    ).json()
    assert (estimate["architecture"], estimate["card"]) == ("qwen2.5-vl-7b", cost.MEASURED.card)
    assert estimate["scaled_from"] is None and "make bench-gpu" in estimate["source"]
    stage = estimate["stages"][0]
    weights = 2 * cost.MEASURED.parameters / cost.GIB
    assert weights < estimate["gpu_memory_gib"] < cost.MEASURED.sft_peak_gib
    mean = statistics.mean([t for t in [stage["tokens_per_row"]["median"]]])
    per_row = cost.MEASURED.sft_s_per_row / cost.MEASURED.tokens_per_row * mean
    assert estimate["gpu_hours"] == pytest.approx(per_row * 800 / 3600, rel=0.2)
    assert not FineTuneJob.objects.exists()  # an estimate creates nothing


def test_a_row_longer_than_max_length_is_refused_by_name_before_the_job_exists(exports, base_model):
    sft, dpo, client = exports
    estimate = client.post(
        "/api/finetune-jobs/estimate/", body([sft], base_model), format="json"
    ).json()
    longest = estimate["stages"][0]["tokens_per_row"]["max"]

    response = client.post(
        "/api/finetune-jobs/", body([sft], base_model, max_length=longest - 1), format="json"
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "finetune_rejected"
    assert f"export {sft.pk} row " in error["message"]
    assert f"is {longest} tokens, longer than max_length {longest - 1}" in error["message"]
    assert "(episode " in error["message"]
    assert not FineTuneJob.objects.exists()
    over = client.post(
        "/api/finetune-jobs/estimate/",
        body([sft], base_model, max_length=longest - 1),
        format="json",
    ).json()["too_long"]
    assert over and all(row["tokens"] == longest for row in over)
    fits = client.post(
        "/api/finetune-jobs/", body([sft], base_model, max_length=longest), format="json"
    )
    assert fits.status_code == 201


def test_bad_estimate_requests_get_a_clear_error(exports, base_model):
    sft, dpo, client = exports
    bad = client.post(
        "/api/finetune-jobs/estimate/", body([sft], base_model, max_length=0), format="json"
    )
    assert bad.status_code == 400 and "max_length" in bad.json()["error"]["message"]
    # A switch given as a string ("false" is truthy) is refused, not read as on.
    switch = body([sft, dpo], base_model, dpo_shared_prompt="false")
    refused = client.post("/api/finetune-jobs/estimate/", switch, format="json")
    assert refused.status_code == 400
    assert "dpo_shared_prompt must be true or false" in refused.json()["error"]["message"]
    jobs = FineTuneJob.objects.count()
    assert client.post("/api/finetune-jobs/", switch, format="json").status_code == 400
    assert FineTuneJob.objects.count() == jobs
    unknown = client.post("/api/finetune-jobs/estimate/", body([sft], "no-such"), format="json")
    assert unknown.status_code == 400 and "unknown base model" in unknown.json()["error"]["message"]
    missing = dict(body([sft], base_model), exports=[10**6])
    assert client.post("/api/finetune-jobs/estimate/", missing, format="json").status_code == 404


# --- housekeeping ---------------------------------------------------------------------------


def test_the_prepared_dataset_lives_in_the_jobs_folder_and_goes_with_it(
    exports, base_model, monkeypatch, tmp_path
):
    """Hugging Face's global cache is this test's own folder here: other test processes load
    exports with ``datasets`` at the same time, into the machine's."""
    sft, dpo, client = exports
    cache = tmp_path / "hf-datasets"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    created = client.post("/api/finetune-jobs/", body([sft], base_model), format="json")
    assert finetune.run_job(created.json()["id"]) == "succeeded"
    assert _arrow_files(cache) == set()
    # Where a load without a folder of its own writes: the same folder.
    parquet = default_storage.path(f"{sft.location}data/*.parquet")
    datasets.load_dataset("parquet", data_files=parquet, split="train")
    assert _arrow_files(cache) != set()


def _arrow_files(root) -> set[str]:
    return {str(p) for p in root.rglob("*.arrow")} if root.exists() else set()


def test_a_loss_point_is_appended_to_the_curve_not_written_over_it(exports, base_model):
    job = FineTuneJob.objects.create(
        base_model="b", base_model_path="/b", stages=[], version_name="v", status="running"
    )
    kept = [{"stage": 1, "kind": "sft", "step": 1, "loss": 2.0}]
    FineTuneJob.objects.filter(pk=job.pk).update(attempt=1, loss_curve=kept)
    job.attempt = 1
    reporter = finetune._JobReporter(job)

    reporter.loss(0, "sft", 2, {"loss": 1.5})
    FineTuneJob.objects.filter(pk=job.pk).update(  # written meanwhile by another writer
        loss_curve=[*kept, {"stage": 1, "kind": "sft", "step": 2, "loss": 1.5}, {"note": 1}]
    )
    reporter.loss(0, "sft", 3, {"loss": 1.0})

    curve = FineTuneJob.objects.get(pk=job.pk).loss_curve
    assert [p.get("step") for p in curve] == [1, 2, None, 3]


def test_a_bf16_job_runs_its_lora_layers_on_bf16_inputs_with_the_update_fused(exports, base_model):
    sft, dpo, client = exports
    dtypes: set[torch.dtype] = set()
    lora_b_calls = 0

    def record(module, args):
        nonlocal lora_b_calls
        if type(module).__name__ == "Identity" and args:  # LoRA dropout 0: nn.Identity
            dtypes.add(args[0].dtype)
        # LoRA's B (rank 4 in, nothing else is): its weight goes into the fused product, its
        # own forward never runs.
        lora_b_calls += isinstance(module, torch.nn.Linear) and module.in_features == LORA["r"]

    created = client.post(
        "/api/finetune-jobs/", body([sft, dpo], base_model, bf16=True), format="json"
    )
    hook = torch.nn.modules.module.register_module_forward_pre_hook(record)
    try:
        assert finetune.run_job(created.json()["id"]) == "succeeded"
    finally:
        hook.remove()

    assert dtypes == {torch.bfloat16}
    assert lora_b_calls == 0
