"""DPO with each pair's prompt encoded once (``model_serving.training.shared_prompt``), checked
on the CPU with the tiny Qwen2.5-VL in float32 against TRL's own ``DPOTrainer`` on the same
batch, the same model and the same adapter: the loss, every LoRA gradient and the logged
figures; the fast attention route and the dense mask agree; gradient checkpointing's
recomputation takes the fast route too; a pair that cannot be packed runs TRL's way."""

import numpy as np
import pytest
import torch
from django.core.files.storage import default_storage
from trl import DPOTrainer

from backend.accounts.roles import Role
from model_serving.training import data, shared_prompt, trainer
from model_serving.training.spec import (
    DatasetFile,
    DatasetRef,
    Hyperparameters,
    LoraSettings,
    hyperparameters,
)
from model_serving.training.vision import FrozenVisionTower
from tests.support.export_data import make_episodes
from tests.support.finetune_data import built_export

pytestmark = pytest.mark.django_db

METRICS = (
    "entropy",
    "logits/chosen",
    "logits/rejected",
    "mean_token_accuracy",
    "rewards/chosen",
    "rewards/rejected",
    "rewards/accuracies",
    "rewards/margins",
    "logps/chosen",
    "logps/rejected",
)


@pytest.fixture(params=[1, 2], ids=["one-pair", "two-pairs"])
def dpo(request, export_storage, tmp_path, project, make_user, base_model):
    """A packing trainer on a real DPO export, its LoRA B matrices drawn at random (so the
    policy differs from the reference), and its first batch: one pair, or two (each packed
    with its own images)."""
    engineer = make_user("erin", project, Role.ENGINEER)
    make_episodes(project, make_user("ann", project, Role.ANNOTATOR), episodes=1, steps=4)
    export = built_export(project, engineer, "dpo")
    ref = DatasetRef(
        export_id=export.pk,
        kind="dpo",
        location=export.location,
        files=tuple(DatasetFile(f["name"], f["sha256"], int(f["size"])) for f in export.files),
    )
    paths = data.fetch(ref, lambda name: default_storage.open(name, "rb"), tmp_path / "rows")
    table = data.load(ref, paths, lambda _: False, tmp_path / "tables")
    hp = Hyperparameters(max_steps=1, dataloader_workers=0, batch_size=request.param)
    model = trainer.load_model(str(base_model), hp)
    FrozenVisionTower.install(model)
    assert shared_prompt.install(model)
    lora = LoraSettings(r=4, alpha=8, dropout=0.0, target_modules=("q_proj", "v_proj"))
    packing = shared_prompt.trainer_class()(
        model=model,
        args=trainer._arguments("dpo", hp, tmp_path / "out"),
        train_dataset=table,
        processing_class=trainer.load_processor(str(base_model)),
        peft_config=trainer._lora_config(lora),
    )
    torch.manual_seed(0)
    for name, parameter in packing.model.named_parameters():
        if "lora_B" in name:
            parameter.data.normal_(0, 0.05)
    # As ``Trainer.train`` sets it up before the first step.
    packing.model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs=packing.args.gradient_checkpointing_kwargs
    )
    packing.model.train()
    batch = next(iter(packing.get_train_dataloader()))
    assert batch["input_ids"].shape[0] == 2 * request.param
    return packing, batch


def loss_and_gradients(dpo_trainer, compute, batch):
    dpo_trainer.model.zero_grad()
    loss = compute(dpo_trainer, dpo_trainer.model, batch, False)
    loss.backward()
    gradients = {
        name: p.grad.clone()
        for name, p in dpo_trainer.model.named_parameters()
        if p.grad is not None
    }
    logged = {key: dpo_trainer._metrics["train"][key][-1] for key in METRICS}
    return loss.detach(), gradients, logged


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-12))


def test_a_packed_pair_gives_trls_loss_gradients_and_figures(dpo):
    packing, batch = dpo
    packed_loss, packed_grads, packed_logged = loss_and_gradients(
        packing, type(packing)._compute_loss, batch
    )
    trl_loss, trl_grads, trl_logged = loss_and_gradients(packing, DPOTrainer._compute_loss, batch)

    assert packed_loss.item() != pytest.approx(0.6931, abs=1e-4)  # policy ≠ reference
    assert packed_loss.item() == pytest.approx(trl_loss.item(), rel=1e-5)
    # Every LoRA matrix of the language model gets a gradient, the same one.
    assert set(packed_grads) == set(trl_grads)
    assert len(trl_grads) == 2 * 2 * 2  # two layers, q and v, A and B
    assert max(relative(packed_grads[n], trl_grads[n]) for n in trl_grads) < 1e-4
    # A reward is beta × (policy − reference) log-probability: a difference of two sums near
    # −300, each exact to a few float32 steps (3e-5 there), so it can differ by beta × that.
    largest = max(abs(trl_logged[k]) for k in ("logps/chosen", "logps/rejected"))
    reward_step = float(packing.args.beta * 4 * np.spacing(np.float32(largest)))
    for key in METRICS:
        tolerance = reward_step if key.startswith("rewards/") else 1e-6
        assert packed_logged[key] == pytest.approx(trl_logged[key], rel=1e-4, abs=tolerance), key


def test_the_split_attention_is_the_dense_mask_and_recomputation_takes_it_too(dpo, monkeypatch):
    packing, batch = dpo
    base = packing.model.get_base_model()
    pairs = [shared_prompt.pack(batch, i, base) for i in range(batch["input_ids"].shape[0] // 2)]
    calls: list[tuple[int, int, bool]] = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def record(query, key, value, attn_mask=None, is_causal=False, **kwargs):
        calls.append((query.shape[2], key.shape[2], is_causal))
        return sdpa(query, key, value, attn_mask=attn_mask, is_causal=is_causal, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", record)
    split_loss, split_grads, _ = loss_and_gradients(packing, type(packing)._compute_loss, batch)

    # Each pair, in each of the two language-model layers, in two calls: the prompt and chosen
    # part causal with no mask to read, the rejected queries against every key; in the
    # policy's forward (gradient checkpointing on), the reference's forward and the policy's
    # recomputation in the backward pass. The vision tower's calls are far shorter.
    expected: list[tuple[int, int, bool]] = []
    for packed in pairs:
        assert packed is not None
        end = int(packed.attention_mask.shape[-1])
        split = end - packed.rejected.numel()
        expected += [(split, split, True), (end - split, end, False)] * 2 * 3
    shortest = min(call[1] for call in expected)  # a prompt: longer than any image's patches
    language = [c for c in calls if c[1] >= shortest]
    assert sorted(language) == sorted(expected)

    # The same pair through plain SDPA with the dense mask: the same loss and gradients.
    text = base.config.get_text_config()
    monkeypatch.setattr(text, "_attn_implementation", "sdpa")
    dense_loss, dense_grads, _ = loss_and_gradients(packing, type(packing)._compute_loss, batch)
    assert split_loss.item() == pytest.approx(dense_loss.item(), rel=1e-5)
    assert max(relative(split_grads[n], dense_grads[n]) for n in dense_grads) < 1e-4


def test_a_pair_whose_rows_do_not_share_their_prompt_runs_trls_way(dpo):
    packing, batch = dpo
    base = packing.model.get_base_model()
    different = dict(batch)
    different["input_ids"] = batch["input_ids"].clone()
    rejected = batch["input_ids"].shape[0] // 2  # pair 0's rejected row
    different["input_ids"][rejected, 0] += 1  # its prompt is no longer the chosen row's
    assert shared_prompt.pack(different, 0, base) is None
    assert shared_prompt.pack(batch, 0, base) is not None

    ours, _, _ = loss_and_gradients(packing, type(packing)._compute_loss, different)
    trls, _, _ = loss_and_gradients(packing, DPOTrainer._compute_loss, different)
    assert ours.item() == trls.item()  # the same code ran: TRL's


def test_the_hyperparameter_turns_packing_off_and_is_on_by_default():
    assert hyperparameters(None).dpo_shared_prompt is True
    assert hyperparameters({"dpo_shared_prompt": False}).dpo_shared_prompt is False
    assert shared_prompt.trainer_class(False) is DPOTrainer
    assert issubclass(shared_prompt.trainer_class(True), DPOTrainer)
    assert shared_prompt.trainer_class(True) is not DPOTrainer


def test_install_leaves_an_eager_model_alone(base_model):
    model = trainer.load_model(str(base_model), Hyperparameters())
    model.config.get_text_config()._attn_implementation = "eager"
    assert shared_prompt.install(model) is False
    assert model.config.get_text_config()._attn_implementation == "eager"
