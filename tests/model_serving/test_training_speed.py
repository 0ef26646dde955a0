"""What makes a training step cheaper without changing what it learns, checked on the CPU with
the tiny Qwen2.5-VL: LoRA inputs kept in bf16 under autocast, decoder layers left out of
gradient checkpointing, attention kept through it (the vision cache has ``test_vision_cache``)."""

import statistics
from dataclasses import replace

import pytest
import torch
from django.core.files.storage import default_storage
from peft import LoraConfig, get_peft_model
from safetensors.torch import load
from torch.utils._python_dispatch import TorchDispatchMode

from model_serving import finetune
from model_serving.models import FineTuneJob
from model_serving.training import (
    cost,
    fused_lora,
    precision,
    recompute,
    trainer,
)
from model_serving.training.spec import Hyperparameters
from tests.support.finetune_data import job_body

ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _bf16_lora_model(base_model, dropout: float = 0.0):
    """The tiny base in bf16 with an fp32 LoRA adapter on every projection, as TRL builds it
    for a bf16 run (PEFT's default ``autocast_adapter_dtype``)."""
    model = trainer.load_model(str(base_model), Hyperparameters(bf16=True))
    torch.manual_seed(3)
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        lora_dropout=dropout,
        target_modules=trainer.language_model_modules(tuple(ALL_PROJECTIONS)),
    )
    model = get_peft_model(model, config)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:  # PEFT starts B at zero; a nonzero B makes every path count
            torch.nn.init.normal_(parameter, std=0.05)
    return model


def _step(model, tokens, autocast: bool = True):
    """One forward and backward (under bf16 autocast unless told otherwise): the loss, the LoRA
    gradients, and the bytes the forward kept for backward."""
    kept = 0

    def keep(tensor):
        nonlocal kept
        kept += tensor.numel() * tensor.element_size()
        return tensor

    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), grads, kept


def test_lora_inputs_kept_in_bf16_give_the_same_loss_and_gradients(base_model):
    model = _bf16_lora_model(base_model)
    assert {p.dtype for n, p in model.named_parameters() if "lora_" in n} == {torch.float32}
    tokens = torch.randint(0, 200, (1, 96))

    loss, grads, _ = _step(model, tokens)
    switched = precision.keep_lora_inputs(model)
    lean_loss, lean_grads, _ = _step(model, tokens)

    assert switched == 2 * len(ALL_PROJECTIONS)  # two decoder layers, seven projections each
    assert torch.equal(lean_loss, loss)
    assert lean_grads.keys() == grads.keys() and len(grads) == 2 * switched  # A and B
    assert all(torch.equal(lean_grads[name], grads[name]) for name in grads)
    # The adapter's weights stay fp32 (the optimizer's updates need it).
    assert {p.dtype for n, p in model.named_parameters() if "lora_" in n} == {torch.float32}


def test_lora_dropout_on_bf16_inputs_keeps_less_for_backward(base_model):
    model = _bf16_lora_model(base_model, dropout=0.05)
    tokens = torch.randint(0, 200, (1, 96))
    dtypes = []
    hooks = [
        module.register_forward_pre_hook(lambda m, args: dtypes.append(args[0].dtype))
        for name, module in model.named_modules()
        if name.endswith("lora_dropout.default")
    ]
    _, _, kept = _step(model, tokens)
    assert set(dtypes) == {torch.float32}  # PEFT's own way: an fp32 copy of every input
    dtypes.clear()
    precision.keep_lora_inputs(model)
    loss, grads, lean_kept = _step(model, tokens)
    for hook in hooks:
        hook.remove()

    assert len(dtypes) == 14 and set(dtypes) == {torch.bfloat16}
    assert lean_kept < kept * 0.9
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads.values())


# --- LoRA's update inside its second product ------------------------------------------------


def _lora_model(base_model, bf16: bool):
    if bf16:
        return _bf16_lora_model(base_model)
    model = trainer.load_model(str(base_model), Hyperparameters(bf16=False))
    torch.manual_seed(3)
    config = LoraConfig(
        r=4,
        lora_alpha=12,  # scaling 3: not a power of two, so rounding would show
        target_modules=trainer.language_model_modules(tuple(ALL_PROJECTIONS)),
    )
    model = get_peft_model(model, config)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.05)
    return model


def _relative_errors(grads, truth):
    return [float((grads[name] - grad).norm() / grad.norm()) for name, grad in truth.items()]


def test_the_fused_lora_update_gives_pefts_loss_and_gradients_in_fp32(base_model):
    model = _lora_model(base_model, bf16=False)
    tokens = torch.randint(0, 200, (1, 96))
    loss, grads, _ = _step(model, tokens, autocast=False)

    assert fused_lora.install(model) == 2 * len(ALL_PROJECTIONS)
    fused_loss, fused_grads, _ = _step(model, tokens, autocast=False)

    assert torch.allclose(fused_loss, loss, rtol=1e-6)
    assert fused_grads.keys() == grads.keys()
    assert max(_relative_errors(fused_grads, grads)) < 1e-5


def test_the_fused_lora_update_in_bf16_is_as_close_to_fp32_as_pefts(base_model):
    """In bf16 any change of rounding moves every gradient a little, so both ways are held
    against the fp32 result of the same weights: the fused one rounds once where PEFT's rounds
    three times, and must be no farther from it."""
    truth_model = _lora_model(base_model, bf16=False)
    weights = {name: value.clone() for name, value in truth_model.state_dict().items()}
    tokens = torch.randint(0, 200, (1, 96))
    truth_loss, truth, _ = _step(truth_model, tokens, autocast=False)
    errors = {}
    for fused in (False, True):
        model = _lora_model(base_model, bf16=True)
        own = model.state_dict()
        model.load_state_dict({k: v.to(own[k].dtype) for k, v in weights.items()})
        precision.keep_lora_inputs(model)
        if fused:
            fused_lora.install(model)
        loss, grads, _ = _step(model, tokens)
        assert torch.allclose(loss, truth_loss, rtol=1e-2)
        errors[fused] = statistics.mean(_relative_errors(grads, truth))

    assert errors[True] <= errors[False] * 1.05


def test_the_fused_forward_leaves_disabled_and_merged_adapters_to_peft(base_model):
    model = _lora_model(base_model, bf16=False)
    fused_lora.install(model)
    tokens = torch.randint(0, 200, (1, 32))
    with torch.no_grad():
        adapted = model(input_ids=tokens).logits
        with model.disable_adapter():
            base = model(input_ids=tokens).logits
        model.merge_adapter()
        merged = model(input_ids=tokens).logits
        model.unmerge_adapter()
        again = model(input_ids=tokens).logits

    assert not torch.allclose(adapted, base, atol=1e-3)
    assert torch.allclose(merged, adapted, atol=1e-5)
    assert torch.allclose(again, adapted, atol=1e-5)


# --- layers left out of checkpointing ------------------------------------------------------


def _trained_adapter(client, request):
    created = client.post("/api/finetune-jobs/", request, format="json")
    assert created.status_code == 201, created.json()
    assert finetune.run_job(created.json()["id"]) == "succeeded"
    job = FineTuneJob.objects.get(pk=created.json()["id"])
    with default_storage.open(f"{job.artifacts_location}/adapter/adapter_model.safetensors") as f:
        return load(f.read())


@pytest.mark.django_db
def test_layers_left_out_of_checkpointing_are_not_recomputed_and_learn_the_same(
    exports, base_model
):
    sft, _, client = exports
    runs = {}
    for layers in (0, 1):
        attention_calls = 0

        def count(module, args, output):
            nonlocal attention_calls
            attention_calls += type(module).__name__ == "Qwen2_5_VLAttention"

        hook = torch.nn.modules.module.register_module_forward_hook(count)
        request = job_body([sft], base_model, uncheckpointed_layers=layers)
        request["version_name"] = f"ui-tars-recompute-{layers}"
        try:
            runs[layers] = (_trained_adapter(client, request), attention_calls)
        finally:
            hook.remove()

    (checkpointed, every_layer_twice), (kept, one_layer_once) = runs[0], runs[1]
    # Two steps of the tiny model's two decoder layers: every layer runs again in backward,
    # except the one left out.
    assert (every_layer_twice, one_layer_once) == (2 * 2 * 2, 2 * (2 + 1))
    assert checkpointed.keys() == kept.keys() and checkpointed
    assert all(torch.equal(checkpointed[name], kept[name]) for name in checkpointed)


@pytest.mark.django_db
def test_more_layers_left_out_than_the_base_has_are_refused_before_a_job_exists(
    exports, base_model
):
    sft, _, client = exports
    for path in ("/api/finetune-jobs/estimate/", "/api/finetune-jobs/"):
        request = job_body([sft], base_model, uncheckpointed_layers=3)
        response = client.post(path, request, format="json")
        assert response.status_code == 400
        message = response.json()["error"]["message"]
        assert "uncheckpointed_layers is 3, but the base has 2 decoder layers" in message
    for wrong in (-1, 1.5, True, "2"):
        response = client.post(
            "/api/finetune-jobs/estimate/",
            job_body([sft], base_model, uncheckpointed_layers=wrong),
            format="json",
        )
        assert response.status_code == 400, wrong
        assert "uncheckpointed_layers must be a whole number" in response.json()["error"]["message"]
    assert not FineTuneJob.objects.exists()


def test_the_trainer_refuses_more_layers_than_the_model_has(base_model):
    model = trainer.load_model(str(base_model), Hyperparameters())
    model.gradient_checkpointing_enable()
    with pytest.raises(recompute.TooManyLayers, match="has 2 decoder layers"):
        recompute.leave_out(model, 3)
    assert recompute.leave_out(model, 1) == 1
    assert [layer.gradient_checkpointing for layer in recompute.decoder_layers(model)] == [
        True,
        False,
    ]


def test_the_estimate_adds_the_memory_of_the_layers_left_out_of_checkpointing():
    tokens = [("sft", [10_000, 15_000])]
    seven = ("qwen2.5-vl-7b", cost.MEASURED.parameters)
    plain = Hyperparameters(keep_attention=False)
    every = cost.estimate(tokens, plain, seven)["gpu_memory_gib"]
    four = cost.estimate(tokens, replace(plain, uncheckpointed_layers=4), seven)
    none = cost.estimate(tokens, replace(plain, gradient_checkpointing=False), seven)
    kept = cost.estimate(tokens, Hyperparameters(), seven)["gpu_memory_gib"]

    layer_gib = cost.LAYER_BYTES_PER_TOKEN["qwen2.5-vl-7b"] * 15_000 / cost.GIB
    assert four["gpu_memory_gib"] == pytest.approx(every + 4 * layer_gib, abs=0.1)
    assert none["gpu_memory_gib"] == pytest.approx(every + 28 * layer_gib, abs=0.1)
    assert none["gpu_memory_gib"] > 100  # as measured: 124 GiB without checkpointing
    # The default keeps every checkpointed layer's attention output: 7,280 bytes a token.
    attention_gib = 28 * 7_280 * 15_000 / cost.GIB
    assert kept == pytest.approx(every + attention_gib, abs=0.1)


# --- attention kept through checkpointing ---------------------------------------------------


class AttentionKernels(TorchDispatchMode):
    """Counts the attention kernels really run: below checkpointing's own dispatch modes, so a
    kept output handed back to the recomputation is not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += func in recompute.ATTENTION_KERNELS
        return func(*args, **(kwargs or {}))


def test_kept_attention_is_not_recomputed_and_gives_the_same_gradients(base_model):
    model = _bf16_lora_model(base_model, dropout=0.1)  # dropout: the recomputation replays it
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    tokens = torch.randint(0, 200, (1, 48), generator=torch.Generator().manual_seed(2))
    results = []
    for keep in (False, True):
        if keep:
            assert recompute.keep_attention(model) == 2
        kernels = AttentionKernels()
        torch.manual_seed(11)
        model.zero_grad()
        with kernels, torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
            loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((kernels.calls, loss.detach(), grads))

    (recomputed, plain_loss, plain), (once, kept_loss, kept) = results
    assert (recomputed, once) == (2 * 2, 2)  # two layers: forward and recomputation, forward
    assert torch.equal(plain_loss, kept_loss)
    assert plain.keys() == kept.keys() and len(plain) == 2 * 7 * 2
    assert all(torch.equal(plain[name], kept[name]) for name in plain)


@pytest.mark.django_db
def test_a_job_keeps_attention_by_default_and_learns_what_it_learns_without(exports, base_model):
    sft, _, client = exports
    runs = {}
    for keep in (True, False):
        request = job_body([sft], base_model, keep_attention=keep)
        request["version_name"] = f"ui-tars-attention-{keep}"
        with AttentionKernels() as kernels:
            runs[keep] = (_trained_adapter(client, request), kernels.calls)

    (kept, kept_calls), (recomputed, recomputed_calls) = runs[True], runs[False]
    # Two steps of two decoder layers: their attention is not run again in backward. (The
    # vision tower's attention, run the same in both jobs, is counted in both.)
    assert recomputed_calls - kept_calls == 2 * 2
    assert kept.keys() == recomputed.keys() and kept
    assert all(torch.equal(kept[name], recomputed[name]) for name in kept)
    assert Hyperparameters().keep_attention is True
