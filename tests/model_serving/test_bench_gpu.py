"""``make bench-gpu``'s CPU smoke run: the tiny architecture through every path of the GPU
benchmark (model built locally, rows of 1920×1080 screenshots from the export job, SFT and DPO
through the real trainer, every figure of BENCH.md's "GPU benchmark")."""

import pytest

from tests.bench import gpu

pytestmark = pytest.mark.django_db


def test_the_gpu_benchmark_runs_the_tiny_architecture_on_the_cpu(settings, tmp_path, capsys):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_HELD_OUT_SHARE = 0.0

    figures = gpu.run_architecture("tiny", tmp_path / "tiny", steps=4)

    print(figures)
    assert figures["gpu_card"] == "cpu"
    assert figures["gpu_tokens_per_row"] > 5  # five screenshots and the prompt's text
    for key in (
        "gpu_sft_s_per_sample_tiny",
        "gpu_dpo_s_per_pair_tiny",
        "gpu_sft_peak_gib_tiny",
        "gpu_dpo_peak_gib_tiny",
        "gpu_sft_floor_share_tiny",
    ):
        assert figures[key] > 0, key
    assert figures["gpu_sft_floor_share_tiny"] < 1  # the floor is a floor
