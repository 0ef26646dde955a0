"""What makes a training step cheaper without changing what it learns, checked on the CPU with
the tiny Qwen2.5-VL: LoRA inputs kept in bf16 under autocast, decoder layers left out of
gradient checkpointing, and optimizer steps filled with runs of one episode's rows."""

import pytest
import torch
from peft import LoraConfig, get_peft_model

from model_serving.demo_model import save_demo_base
from model_serving.training import precision, trainer
from model_serving.training.spec import Hyperparameters

ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    return save_demo_base(tmp_path_factory.mktemp("tiny-base"))


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


def _step(model, tokens):
    """One bf16-autocast forward and backward: the loss, the LoRA gradients, and the bytes the
    forward kept for backward."""
    kept = 0

    def keep(tensor):
        nonlocal kept
        kept += tensor.numel() * tensor.element_size()
        return tensor

    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
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
