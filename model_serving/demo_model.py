"""The demo's base model: a tiny Qwen2.5-VL and its processor, built locally in seconds (no hub
download, CPU only). ``make demo`` saves it as the deployment's base model ``demo-tiny-qwen``,
so that the whole flywheel (export, fine-tune, version, serve, evaluate) can be tried on a
machine without a GPU; the tests train on the same model. Its weights are random: it learns
the datasets' format, not the task. What proposes for it in the demo is the demo endpoint
(``model_serving.demo_endpoint``), whose answers are scripted.

- **Tokenizer**: byte-level BPE over the 256 byte symbols (no merges), with Qwen2.5-VL's
  special tokens (``<|im_start|>``, ``<|vision_start|>``, ``<|image_pad|>``, ``<|box_start|>``…)
  and Qwen2.5-VL's stock chat template.
- **Image processor**: ``Qwen2VLImageProcessorPil`` with small ``min_pixels``/``max_pixels``, so
  a 1080p screenshot becomes a handful of patches.
- **Processor**: Qwen2.5-VL's, without its video processor. transformers 5.x builds that one
  only with torchvision, whose PyPI wheel for this torch is a CUDA build that fails on the CPU
  torch; screenshots never need it.
- **Model**: ``Qwen2_5_VLForConditionalGeneration`` with hidden size 64, 2 layers and a 2-block
  vision tower, randomly initialised with a fixed seed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2VLImageProcessorPil,
)

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen2.5-VL's chat template as published with the model.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class ImageOnlyQwen2_5_VLProcessor(Qwen2_5_VLProcessor):
    """Qwen2.5-VL's processor for images and text only: no video processor to build."""

    def __init__(self, image_processor: Any = None, tokenizer: Any = None, **kwargs: Any):
        # ProcessorMixin checks its sub-processors against the class's declared attributes;
        # the video processor is declared by the parent and deliberately absent here.
        super().__init__(image_processor=image_processor, tokenizer=tokenizer, **kwargs)

    @classmethod
    def get_attributes(cls) -> list[str]:
        return ["image_processor", "tokenizer"]


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    byte_symbols = list(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: index for index, symbol in enumerate(sorted(byte_symbols))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS,
        chat_template=CHAT_TEMPLATE,
    )
    return tokenizer


def tiny_processor() -> ImageOnlyQwen2_5_VLProcessor:
    image_processor = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=112 * 112)
    return ImageOnlyQwen2_5_VLProcessor(
        image_processor=image_processor, tokenizer=tiny_tokenizer(), chat_template=CHAT_TEMPLATE
    )


def tiny_model(processor: ImageOnlyQwen2_5_VLProcessor) -> Qwen2_5_VLForConditionalGeneration:
    tokenizer = processor.tokenizer
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 32768,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [2, 3, 3],
            },
            "bos_token_id": None,
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "fullatt_block_indexes": [1],
            "window_size": 56,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(0)
    return Qwen2_5_VLForConditionalGeneration(config)


def save_demo_base(folder: Path) -> Path:
    """A checkpoint folder as a deployment has one: weights, tokenizer, processor. Written
    into a sibling folder first and renamed, so a half-written folder is never taken for one."""
    if (folder / "config.json").exists():
        return folder
    partial = folder.with_name(f".{folder.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    processor = tiny_processor()
    tiny_model(processor).save_pretrained(partial)
    processor.save_pretrained(partial)
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial.rename(folder)
    return folder
