"""DPO with each pair's prompt encoded once: the chosen and the rejected completion packed
after one copy of the prompt they share.

TRL's ``DPOTrainer`` runs a pair as a batch of two sequences, prompt + chosen and prompt +
rejected, through the policy and again through the reference: a prompt of five screenshots
(some 15,000 tokens) four times a step, for completions of a few dozen tokens. Here a pair is
one sequence, prompt + chosen + rejected, in which the rejected tokens attend to the prompt
and to each other but not to the chosen ones, and take the positions they would have right
after the prompt. Every token sees what it sees in TRL's two sequences, so the
log-probabilities, the loss and its gradients are TRL's (``test_shared_prompt`` checks them
against TRL's own on the tiny model), for one prompt through the policy and one through the
reference instead of two each. Only the positions that predict a completion token go through
the language-model head.

**Attention.** The pair's mask is built dense (4D, right for any attention function), and it
carries the pair's layout. The attention registered here (``SHARED_SDPA``) is PyTorch's SDPA
as transformers calls it, except for a mask with a layout: then the prompt and the chosen part
are attended causally in one call (the flash kernel on a GPU, no mask to read) and the few
rejected queries against the prompt and themselves in a second, small call. The layout rides
on the mask, so gradient checkpointing's recomputation in the backward pass takes the same
route.

**Where it applies.** The language model uses this attention (``install``; with
flash-attention installed too, which then serves the vision tower alone); the sigmoid loss
(the trainer's), no weighting, one pair's prompt the same for its chosen and rejected rows.
Anything else (another loss, a model without Qwen2.5-VL's 3D positions, the
``dpo_shared_prompt`` hyperparameter off) runs TRL's own way.
"""

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

SHARED_SDPA = "tandem_shared_prompt_sdpa"
_LAYOUT = "tandem_shared_prompt"  # attribute of a pair's mask: (prompt length, chosen end)


def install(model: Any) -> bool:
    """Give ``model``'s language model the shared-prompt attention, where it uses SDPA.
    Returns whether it did."""
    from transformers import AttentionInterface  # weight: transformers, train workers only
    from transformers.integrations.sdpa_attention import (  # weight: as above
        sdpa_attention_forward,
    )
    from transformers.masking_utils import (  # weight: as above
        ALL_MASK_ATTENTION_FUNCTIONS,
        AttentionMaskInterface,
    )

    text = model.config.get_text_config()
    # With flash-attention installed the language model comes to SDPA too: its causal path is a
    # flash kernel, and flash-attention's own takes no mask, so it could not pack a pair. The
    # vision tower keeps flash-attention's variable-length windows.
    if text._attn_implementation not in ("sdpa", "flash_attention_2", SHARED_SDPA):
        return False

    def attention(
        module: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        layout = getattr(attention_mask, _LAYOUT, None)
        if layout is None:
            return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
        assert attention_mask is not None
        _, split = layout
        kwargs.pop("is_causal", None)
        first, _ = sdpa_attention_forward(
            module,
            query[:, :, :split],
            key[:, :, :split],
            value[:, :, :split],
            None,
            is_causal=True,
            **kwargs,
        )
        second, _ = sdpa_attention_forward(
            module, query[:, :, split:], key, value, attention_mask[:, :, split:], **kwargs
        )
        return torch.cat([first, second], dim=1), None

    AttentionInterface.register(SHARED_SDPA, attention)
    AttentionMaskInterface.register(SHARED_SDPA, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    text._attn_implementation = SHARED_SDPA
    return True


@dataclass
class PackedPair:
    """One pair as one sequence: prompt [0, prompt), chosen [prompt, split), rejected
    [split, end)."""

    input_ids: torch.Tensor  # [1, end]
    attention_mask: torch.Tensor  # [1, 1, end, end] bool, with the layout attached
    position_ids: torch.Tensor  # [3, 1, end]
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    keep: torch.Tensor  # the positions whose logits predict a completion token
    chosen: torch.Tensor  # the chosen completion's tokens
    rejected: torch.Tensor  # the rejected completion's tokens


def pack(inputs: dict[str, Any], pair: int, model: Any) -> PackedPair | None:
    """Pair ``pair`` of a DPO collator's batch (chosen rows, then rejected rows, flushed
    left) as one sequence; None where it cannot be packed (its two rows do not share their
    prompt, a row without prompt or completion, no token types to place the images by)."""
    ids, completion = inputs["input_ids"], inputs["completion_mask"]
    pairs = ids.shape[0] // 2
    rows = (pair, pairs + pair)
    starts, tokens = [], []
    for row in rows:
        marked = completion[row].nonzero()
        if marked.numel() == 0:
            return None
        first, last = int(marked[0]), int(marked[-1]) + 1
        starts.append(first)
        tokens.append(ids[row, first:last])
    prompt = starts[0]
    shared = starts[1] == prompt and torch.equal(ids[rows[0], :prompt], ids[rows[1], :prompt])
    if prompt < 1 or not shared:
        return None
    chosen, rejected = tokens
    split = prompt + chosen.numel()
    end = split + rejected.numel()
    device = ids.device
    sequence = torch.cat([ids[pair, :split], rejected]).unsqueeze(0)

    images = _images_of(inputs, ids, pair, model)
    pixel_values, grid = images if images is not None else (None, None)
    kinds = inputs.get("mm_token_type_ids")
    if kinds is None:
        return None
    positions, _ = model.model.get_rope_index(
        ids[pair : pair + 1, :split],
        mm_token_type_ids=kinds[pair : pair + 1, :split],
        image_grid_thw=grid,
    )
    # The rejected tokens take the positions the chosen ones have: right after the prompt.
    steps = torch.arange(rejected.numel(), device=device)
    positions = torch.cat([positions, positions[:, :, prompt : prompt + 1] + steps], dim=2)

    mask = torch.ones(end, end, dtype=torch.bool, device=device).tril_()
    mask[split:, prompt:split] = False  # the rejected part never sees the chosen one
    mask = mask[None, None]
    setattr(mask, _LAYOUT, (prompt, split))
    # Chosen token k is predicted at prompt - 1 + k; rejected token 0 at prompt - 1 too (its
    # logits are the chosen's first), rejected token k ≥ 1 at split + k - 1.
    keep = torch.cat(
        [
            torch.arange(prompt - 1, split - 1, device=device),
            torch.arange(split, end - 1, device=device),
        ]
    )
    return PackedPair(sequence, mask, positions, pixel_values, grid, keep, chosen, rejected)


def _images_of(
    inputs: dict[str, Any], ids: torch.Tensor, pair: int, model: Any
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The chosen row's images of ``pair``: the collator lists every row's images, chosen
    rows first; a row's count is its vision-start tokens."""
    grid = inputs.get("image_grid_thw")
    if grid is None:
        return None
    start = model.config.vision_start_token_id
    counts = (ids == start).sum(dim=1).tolist()
    if counts[pair] == 0:
        return None
    first = sum(counts[:pair])
    rows = grid[first : first + counts[pair]]
    patches = grid.prod(dim=1).tolist()
    offset = sum(patches[:first])
    size = sum(patches[first : first + counts[pair]])
    return inputs["pixel_values"][offset : offset + size], rows


@dataclass
class Scores:
    """A pass's log-probabilities of each completion and the figures TRL logs."""

    chosen: torch.Tensor  # summed log-probability, a scalar
    rejected: torch.Tensor
    entropy: torch.Tensor  # summed over every completion token
    chosen_logits: torch.Tensor  # summed mean logit of each chosen token
    rejected_logits: torch.Tensor
    chosen_top1: torch.Tensor  # chosen tokens that were the most likely


def score(model: Any, packed: PackedPair) -> Scores:
    """One forward pass over a packed pair."""
    logits = model(
        input_ids=packed.input_ids,
        attention_mask=packed.attention_mask,
        position_ids=packed.position_ids,
        pixel_values=packed.pixel_values,
        image_grid_thw=packed.image_grid_thw,
        use_cache=False,
        logits_to_keep=packed.keep,
    ).logits[0]
    chosen_count = packed.chosen.numel()
    chosen_logits = logits[:chosen_count]
    rejected_logits = torch.cat([logits[:1], logits[chosen_count:]])
    every = torch.cat([chosen_logits, rejected_logits]).float()
    log_probs = F.log_softmax(every, dim=-1)
    targets = torch.cat([packed.chosen, packed.rejected])
    token = log_probs.gather(1, targets[:, None]).squeeze(1)
    with torch.no_grad():
        entropy = -(log_probs.exp() * log_probs).sum(dim=-1).sum()
        means = every.mean(dim=-1)
        top1 = every[:chosen_count].argmax(dim=-1) == packed.chosen
    return Scores(
        chosen=token[:chosen_count].sum(),
        rejected=token[chosen_count:].sum(),
        entropy=entropy,
        chosen_logits=means[:chosen_count].sum(),
        rejected_logits=means[chosen_count:].sum(),
        chosen_top1=top1.sum(),
    )


def trainer_class(shared: bool = True) -> type:
    """TRL's ``DPOTrainer`` with pairs packed (see the module docstring); TRL's own where
    ``shared`` is false."""
    from accelerate.utils import is_peft_model  # weight: accelerate, train workers only
    from trl import DPOTrainer  # weight: TRL, train workers only
    from trl.models.utils import disable_gradient_checkpointing  # weight: as above
    from trl.trainer.utils import use_adapter  # weight: as above

    class SharedPromptDPOTrainer(DPOTrainer):  # type: ignore[misc]
        def _packs(self) -> bool:
            text = self.accelerator.unwrap_model(self.model).config.get_text_config()
            return (
                text._attn_implementation == SHARED_SDPA
                and list(self.loss_types) == ["sigmoid"]
                and not self.use_weighting
                and self.ld_alpha is None
                and self.f_divergence_type == "reverse_kl"
                and not self.aux_loss_enabled
            )

        def _compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool) -> Any:
            if return_outputs or not self._packs():
                return super()._compute_loss(model, inputs, return_outputs)
            unwrapped = self.accelerator.unwrap_model(model)
            base = unwrapped.get_base_model() if is_peft_model(unwrapped) else unwrapped
            if not hasattr(getattr(base, "model", None), "get_rope_index"):
                return super()._compute_loss(model, inputs, return_outputs)
            pairs = inputs["input_ids"].shape[0] // 2
            packed = [pack(inputs, pair, base) for pair in range(pairs)]
            if any(p is None for p in packed):
                return super()._compute_loss(model, inputs, return_outputs)
            policy = [score(model, p) for p in packed if p is not None]
            reference = self._reference(model, unwrapped, inputs, packed)
            chosen = torch.stack([s.chosen for s in policy])
            rejected = torch.stack([s.rejected for s in policy])
            chosen_ratio = chosen - reference[0]
            rejected_ratio = rejected - reference[1]
            loss = -F.logsigmoid(self.beta * (chosen_ratio - rejected_ratio)).mean()
            self._log_pairs(inputs, packed, policy, chosen_ratio, rejected_ratio)
            return loss

        def _reference(
            self, model: Any, unwrapped: Any, inputs: dict[str, Any], packed: list[Any]
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if self.precompute_ref_logps:
                return inputs["ref_chosen_logps"], inputs["ref_rejected_logps"]
            trained: Any = self.model
            checkpointing: Any = self.args.gradient_checkpointing_kwargs
            with torch.no_grad(), disable_gradient_checkpointing(trained, checkpointing):
                if is_peft_model(unwrapped) and self.ref_model is None:
                    # A new adapter: the base model is the reference; an adapter trained
                    # further: the copy TRL loaded as "ref".
                    name = "ref" if "ref" in unwrapped.peft_config else None
                    with use_adapter(unwrapped, adapter_name=name):
                        scores = [score(model, p) for p in packed]
                else:
                    scores = [score(self.ref_model, p) for p in packed]
            return (
                torch.stack([s.chosen for s in scores]),
                torch.stack([s.rejected for s in scores]),
            )

        def _log_pairs(
            self,
            inputs: dict[str, Any],
            packed: list[Any],
            policy: list[Scores],
            chosen_ratio: torch.Tensor,
            rejected_ratio: torch.Tensor,
        ) -> None:
            """The figures TRL's own loss logs, under its names."""
            trained: Any = self.model
            mode = "train" if trained.training else "eval"
            metrics = self._metrics[mode]
            chosen_tokens = sum(p.chosen.numel() for p in packed)
            rejected_tokens = sum(p.rejected.numel() for p in packed)
            entropy = sum(float(s.entropy) for s in policy)
            metrics["entropy"].append(entropy / max(chosen_tokens + rejected_tokens, 1))
            if mode == "train":
                self._total_train_tokens += int(inputs["attention_mask"].sum()) // self._tp_size
            metrics["num_tokens"] = [self._total_train_tokens]
            metrics["logits/chosen"].append(
                sum(float(s.chosen_logits) for s in policy) / max(chosen_tokens, 1)
            )
            metrics["logits/rejected"].append(
                sum(float(s.rejected_logits) for s in policy) / max(rejected_tokens, 1)
            )
            top1 = sum(int(s.chosen_top1) for s in policy)
            metrics["mean_token_accuracy"].append(top1 / max(chosen_tokens, 1))
            chosen_rewards = self.beta * chosen_ratio.detach()
            rejected_rewards = self.beta * rejected_ratio.detach()
            metrics["rewards/chosen"].append(float(chosen_rewards.mean()))
            metrics["rewards/rejected"].append(float(rejected_rewards.mean()))
            accuracies = (chosen_rewards > rejected_rewards).float().mean()
            metrics["rewards/accuracies"].append(float(accuracies))
            metrics["rewards/margins"].append(float((chosen_rewards - rejected_rewards).mean()))
            logps = torch.stack([torch.stack([s.chosen, s.rejected]) for s in policy]).detach()
            metrics["logps/chosen"].append(float(logps[:, 0].mean()))
            metrics["logps/rejected"].append(float(logps[:, 1].mean()))

    return SharedPromptDPOTrainer if shared else DPOTrainer
