"""``make bench-gpu``'s CPU smoke run: the tiny architecture through every path of the GPU
benchmark. Rows of 1920×1080 screenshots come from the export job (``--prepare``'s part, which
needs the database); a separate process without Django trains on them (``--rows``, as on a GPU
machine without Tandem's database): model built locally, SFT and DPO through the real trainer,
the parts of a step timed alone, every figure of the GPU benchmark, the speed settings that
trade something (``--variants``), the profiles."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench import gpu_data

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_benchmark_runs_the_tiny_architecture_on_rows_made_elsewhere(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_HELD_OUT_SHARE = 0.0
    rows = gpu_data.export_rows(tmp_path / "rows", steps=4)
    assert {kind: ref.kind for kind, (ref, _) in rows.items()} == {"sft": "sft", "dpo": "dpo"}

    environment = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO")}
    script = (
        "import runpy, sys; sys.argv[0] = 'gpu'; "
        "runpy.run_module('tests.bench.gpu', run_name='__main__', alter_sys=True)"
    )
    probe = "import atexit, sys; atexit.register(lambda: print('django', 'django' in sys.modules))"
    results = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-c", f"{probe}; {script}"]
        + ["--rows", str(tmp_path / "rows"), "--arch", "tiny", "--steps", "4"]
        + ["--results", str(results), "--profile", str(tmp_path / "profiles"), "--variants"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().endswith("django False")  # the training side needs no database
    figures = json.loads(results.read_text())
    assert figures["gpu_card"] == "cpu"
    assert figures["gpu_tokens_per_row"] > 5  # five screenshots and the prompt's text
    for key in (
        "gpu_sft_s_per_sample_tiny",
        "gpu_dpo_s_per_pair_tiny",
        "gpu_sft_peak_gib_tiny",
        "gpu_dpo_peak_gib_tiny",
        "gpu_sft_floor_share_tiny",
        "gpu_preprocess_s_per_row_tiny",
        "gpu_vision_s_per_row_tiny",
        "gpu_vision_s_per_row_own_tiny",
    ):
        assert figures[key] > 0, key
    assert figures["gpu_sft_floor_share_tiny"] < 1  # the floor is a floor
    # Without the vision cache SFT encodes every screenshot it is asked for. With it (the
    # default) a screenshot met again in a later step is not encoded again; DPO asks twice for
    # each (policy and reference: the pair packed) and TRL's own DPO, the anchor, four times.
    assert figures["gpu_sft_nocache_images_encoded_share_tiny"] == 1.0
    assert figures["gpu_sft_images_encoded_share_tiny"] < 1.0
    assert figures["gpu_dpo_images_encoded_share_tiny"] < 0.5
    assert figures["gpu_dpo_trl_images_encoded_share_tiny"] < 0.25
    assert figures["gpu_dpo_trl_s_per_pair_tiny"] > 0
    assert figures["gpu_dpo_trl_over_shared_tiny"] > 0
    # The speed settings and candidates: one layer kept out of checkpointing, no vision cache,
    # attention recomputed, PyTorch's rms_norm.
    for name in ("sft_layers", "sft_nocache", "sft_recompute", "sft_norm"):
        assert figures[f"gpu_{name}_s_per_sample_tiny"] > 0
        assert figures[f"gpu_{name}_speedup_tiny"] > 0
    # Liger's kernels are Triton's: on the CPU the variant says why it did not run.
    assert "need a GPU" in figures["gpu_sft_liger_not_run_tiny"]
    assert "gpu_sft_liger_s_per_sample_tiny" not in figures
    assert "needs a GPU" in figures["gpu_sft_cudnn_not_run_tiny"]
    # The trainer's SFT and DPO runs, profiled over their last two steps; not the anchor.
    profiles = sorted(p.name for p in (tmp_path / "profiles").iterdir())
    assert profiles == ["profile-dpo-tiny.txt", "profile-sft-tiny.txt"]
    for name in profiles:
        table = (tmp_path / "profiles" / name).read_text()
        assert "Self CPU" in table and "aten::" in table, table[:500]
        assert "tandem.vision_tower: " in table  # the tower's inclusive time, named
