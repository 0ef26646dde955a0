"""The GPU benchmark (``make bench-gpu``): Tandem's own trainer on a random-weight Qwen2.5-VL of
a named architecture, on rows from Tandem's own exporter; writes ``bench-gpu-results.json``.

- **Model**: Qwen2.5-VL-7B's or -3B's architecture (the configs below, as published with the
  models; UI-TARS-1.5-7B is the 7B), random bf16 weights built on the GPU and saved locally:
  nothing is downloaded. The tokenizer is the demo's byte-level one with Qwen2.5-VL's special
  tokens (``model_serving.demo_model``), so text takes more tokens than Qwen's BPE would
  (about 3× on these prompts); the image processor has UI-TARS-1.5's limits, so a 1920×1080
  screenshot is 2,691 visual tokens as with the real model.
- **Rows**: episodes of 1920×1080 screenshots (``tests.support.export_data``), SFT and DPO
  exports built by the export job; a row holds five screenshots (the history window).
- **Runs**: an SFT stage, then a DPO stage on its own, through
  ``model_serving.training.trainer.train`` with the job defaults (batch 1, one row a step,
  the vision cache and its episode pools). Step times come from the trainer's progress
  reports; the first ``WARM_UP`` steps are left out and the mean of the rest is reported (the
  mean: steps differ by the screenshots they encode, and a job pays for every step). With the
  cache, a step's new screenshots are fewer the further into an epoch it is: run a whole
  epoch (``--steps`` as many as the rows: six a kind an episode, ``--episodes``) for a job's
  cost; the warm-up steps left out are those that encode the most.
- **Figures** (BENCH.md, "GPU benchmark"): ``gpu_card``; ``gpu_sft_s_per_sample_<arch>``,
  ``gpu_dpo_s_per_pair_<arch>``; ``gpu_sft_peak_gib_<arch>``, ``gpu_dpo_peak_gib_<arch>``
  (``torch.cuda.max_memory_allocated``; on the CPU the process's peak resident memory) and,
  on a GPU, ``gpu_sft_reserved_gib_<arch>``, ``gpu_dpo_reserved_gib_<arch>`` (the most the
  caching allocator held, ``torch.cuda.max_memory_reserved``);
  ``gpu_sft_floor_share_<arch>``: the arithmetic floor (forward plus activation backward,
  4 × parameters × tokens FLOP, at the device's matmul rate measured here) over the measured
  time; ``gpu_tokens_per_row``; ``gpu_<kind>_images_encoded_share_<arch>``: screenshots the
  vision tower really encoded over those asked of it (DPO asks twice for each: policy and
  reference).
- **The anchor**: DPO runs a second time as TRL's ``DPOTrainer`` runs it, two sequences a pair
  (``dpo_shared_prompt`` off): ``gpu_dpo_trl_s_per_pair_<arch>``, ``gpu_dpo_trl_peak_gib_<arch>``
  and ``gpu_dpo_trl_over_shared_<arch>``, its time over the trainer's.
- **Parts of a step**, timed alone on one full row: ``gpu_preprocess_s_per_row_<arch>`` (the
  image processor, on one CPU core; dataloader workers run it beside the GPU),
  ``gpu_vision_s_per_row_<arch>`` (the frozen tower as the trainer runs it) and
  ``gpu_vision_s_per_row_own_<arch>`` (transformers' own attention, one call a window).
- **Speed settings and candidates** (``--variants``, each ``VARIANT_STEPS`` steps at most):
  SFT again with ``uncheckpointed_layers`` (``KEPT_LAYERS`` of the architecture: memory),
  without the vision cache (``vision_cache_gib`` 0: each step's own screenshots, rows
  shuffled over the dataset; what the cache saves), with attention recomputed in backward
  (``keep_attention`` off; what keeping it saves), with cuDNN's attention kernel ranked first
  (GPU only), with Liger's fused RMSNorm and SwiGLU kernels (a dependency; GPU only), and with
  PyTorch's own fused ``rms_norm`` in place of transformers' RMSNorm: ``gpu_sft_layers_*``,
  ``gpu_sft_nocache_*``, ``gpu_sft_recompute_*``, ``gpu_sft_cudnn_*``, ``gpu_sft_liger_*``
  and ``gpu_sft_norm_*``, each with its ``..._speedup_<arch>``, the trainer's default SFT
  time over its own (below 1: the default is faster). A variant that cannot run or fails says
  why in ``gpu_sft_<variant>_not_run_<arch>``; the other runs go on. The anchor runs as many
  steps as the variants.
- **Profiles** (``--profile DIR``): the last two steps of the SFT and DPO runs under PyTorch's
  profiler (left out of the step time): a table of operators by device time per run in
  ``DIR`` and ``gpu_<kind>_device_busy_share_<arch>``, the share of those steps' wall time the
  GPU spent in kernels.
- **Where the rows are made**: the export needs Tandem's database; a GPU machine without one
  trains on rows made elsewhere: ``--prepare DIR`` (here) writes them, ``--rows DIR`` (there)
  trains on them, importing nothing of Django.

Without a GPU, ``tiny`` (the demo model's architecture) runs on the CPU with small image
limits: a smoke test of every path, run by ``tests/model_serving/test_bench_gpu.py``.
"""

import argparse
import contextlib
import gc
import io
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from tests.bench.gpu_data import HISTORY, build_base, export_rows, full_windows, saved_rows
from tests.bench.gpu_variants import VARIANT_PATCHES

RESULTS_PATH = Path(__file__).resolve().parents[2] / "bench-gpu-results.json"
WARM_UP = 2
PROFILED = 2  # steps under the profiler, with --profile
# --variants: decoder layers kept out of checkpointing (about 4.6 GiB each on a 7B row, 2.7 on a
# 3B: both stay under 70 GiB); the steps each variant (and the anchor) runs at most.
KEPT_LAYERS = {"7b": 8, "3b": 8, "tiny": 1}
VARIANT_STEPS = 8
GOALS = {
    "gpu_sft_s_per_sample_7b": "≤ 2.0",
    "gpu_dpo_s_per_pair_7b": "≤ 6",
    "gpu_sft_peak_gib_7b": "≤ 70",
    "gpu_dpo_peak_gib_7b": "≤ 70",
}


@dataclass
class StepClock:
    """A trainer ``Reporter`` that keeps the time of every step's end; with ``profile`` set,
    the last ``PROFILED`` steps run under PyTorch's profiler (and are left out of the time)."""

    ends: list[float] = field(default_factory=list)
    steps: int = 0
    profile: bool = False
    profiler: Any = None

    def progress(self, fraction: float) -> None:
        self.ends.append(time.perf_counter())
        if self.profile and len(self.ends) == self.steps - PROFILED:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.profiler = torch.profiler.profile(activities=activities)
            self.profiler.start()
        elif self.profiler is not None and len(self.ends) == self.steps:
            self.profiler.stop()

    def loss(self, stage: int, kind: str, step: int, logs: dict[str, float]) -> None:
        pass

    def log(self, line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    def cancelled(self) -> bool:
        return False

    def seconds_per_step(self) -> float:
        # The last report is the run's end (progress 1.0), not a step.
        gaps = [b - a for a, b in zip(self.ends[:-2], self.ends[1:-1], strict=True)]
        if self.profiler is not None:
            gaps = gaps[:-PROFILED]
        return statistics.mean(gaps[WARM_UP - 1 :] or gaps)

    def profiled(self) -> tuple[str, float]:
        """The profiled steps' table of operators (by device time on a GPU, CPU time on the
        CPU) and the share of their wall time the device was busy with kernels."""
        events = self.profiler.key_averages()
        cuda = torch.cuda.is_available()
        key = "self_device_time_total" if cuda else "self_cpu_time_total"
        table = events.table(sort_by=key, row_limit=40, max_name_column_width=70)
        inclusive = "device_time_total" if cuda else "cpu_time_total"
        for event in events:  # ranges the trainer names (record_function), with what is inside
            if event.key.startswith("tandem."):
                table += f"\n{event.key}: {getattr(event, inclusive, 0) / 1e3:.1f} ms inclusive"
        wall_us = (self.ends[self.steps - 1] - self.ends[self.steps - 1 - PROFILED]) * 1e6
        busy_us = sum(getattr(e, key, 0) for e in events) if cuda else 0.0
        return table, busy_us / wall_us


class NoCheckpoints:
    """A benchmark resumes nothing: its checkpoints are not kept."""

    def save_step(self, stage: int, folder: Path, step: int) -> None:
        pass

    def save_stage(self, stage: int, adapter: Path, record: dict[str, Any]) -> None:
        pass


def run_architecture(
    arch: str,
    workdir: Path,
    steps: int,
    rows: dict[str, tuple[Any, list[Path]]] | None = None,
    profile: Path | None = None,
    variants: bool = False,
) -> dict[str, float | int | str]:
    """Build, export (unless ``rows`` are given), train SFT then DPO; the figures with the
    architecture's suffix; with ``profile``, the trainer's runs' last steps profiled into that
    folder; with ``variants``, SFT with the speed settings that trade something. Training needs
    no Django: only the export does."""
    from model_serving.training import data, lengths, trainer  # weight: torch, TRL
    from model_serving.training.spec import (  # beside the trainer, as above
        Stage,
        TrainingSpec,
        hyperparameters,
    )

    cuda = torch.cuda.is_available()
    base = build_base(arch, workdir / "base")
    rows = rows or export_rows(workdir / "rows", steps)
    counter = lengths.TokenCounter.for_base(str(base))
    hp = hyperparameters({"max_steps": steps, "gradient_accumulation_steps": 1})
    figures: dict[str, float | int | str] = {"gpu_card": device_name()}
    short = replace(hp, max_steps=min(steps, VARIANT_STEPS))
    # DPO twice: the trainer's shared prompt, then TRL's own two sequences a pair (the anchor).
    runs = [
        ("sft", "", hp),
        ("dpo", "", hp),
        ("dpo", "_trl", replace(short, dpo_shared_prompt=False)),
    ]
    if variants:
        runs += [
            ("sft", "_layers", replace(short, uncheckpointed_layers=KEPT_LAYERS[arch])),
            ("sft", "_nocache", replace(short, vision_cache_gib=0)),
            ("sft", "_recompute", replace(short, keep_attention=False)),
            ("sft", "_cudnn", short),
            ("sft", "_liger", short),
            ("sft", "_norm", short),
        ]
    for kind, variant, settings in runs:
        ref, paths = rows[kind]
        table = full_windows(data.load(ref, paths, lambda _: False, workdir / "tables"))
        if kind == "sft":
            tokens = [row.tokens for row in lengths.row_lengths(paths, kind, counter)]
            tokens_per_row = round(statistics.median(tokens))
            figures["gpu_tokens_per_row"] = tokens_per_row
        spec = TrainingSpec(str(base), (Stage(kind, ref),), hyperparameters=settings)
        name = f"{kind}{variant}"
        clock = StepClock(steps=settings.max_steps, profile=profile is not None and not variant)
        if cuda:
            gc.collect()  # the last stage's model and trainer hold reference cycles
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        try:
            with VARIANT_PATCHES.get(variant, contextlib.nullcontext)():
                outcome = trainer.train(
                    spec, [table], workdir / f"run-{name}", clock, NoCheckpoints()
                )
        except Exception as error:  # noqa: BLE001 - a variant's failure is a figure; the rest run
            if not variant or variant == "_trl":
                raise
            figures[f"gpu_{name}_not_run_{arch}"] = f"{type(error).__name__}: {error}"[:400]
            print(f"bench-gpu: {name} {arch} not run: {error}", file=sys.stderr, flush=True)
            continue
        seconds = clock.seconds_per_step() / (
            settings.batch_size * settings.gradient_accumulation_steps
        )
        peak = (
            torch.cuda.max_memory_allocated() / 1024**3
            if cuda
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
        )
        if clock.profiler is not None and profile is not None:
            operators, busy = clock.profiled()
            (profile / f"profile-{name}-{arch}.txt").write_text(operators)
            if cuda:
                figures[f"gpu_{name}_device_busy_share_{arch}"] = round(busy, 3)
        unit = "pair" if kind == "dpo" else "sample"
        figures[f"gpu_{name}_s_per_{unit}_{arch}"] = round(seconds, 3)
        figures[f"gpu_{name}_peak_gib_{arch}"] = round(peak, 2)
        if cuda:  # what the caching allocator held: the card must have this much free
            reserved = torch.cuda.max_memory_reserved() / 1024**3
            figures[f"gpu_{name}_reserved_gib_{arch}"] = round(reserved, 2)
        vision = outcome.stages[-1]["vision_tower"]
        figures[f"gpu_{name}_images_encoded_share_{arch}"] = round(
            vision["encoded"] / max(vision["asked"], 1), 3
        )
        if name == "sft":
            floor = 4 * parameters(base) * tokens_per_row / matmul_flops()
            figures[f"gpu_sft_floor_share_{arch}"] = round(floor / seconds, 3)
            figures |= row_parts(base, paths[0], arch)
        if name == "dpo_trl":
            ours = figures[f"gpu_dpo_s_per_pair_{arch}"]
            figures[f"gpu_dpo_trl_over_shared_{arch}"] = round(seconds / float(ours), 2)
        if name.startswith("sft_"):
            default = figures.get(f"gpu_sft_s_per_sample_{arch}")
            if default is not None:
                figures[f"gpu_{name}_speedup_{arch}"] = round(float(default) / seconds, 2)
        print(f"bench-gpu: {name} {arch}: {figures}", file=sys.stderr, flush=True)
    return figures


def row_parts(base: Path, parquet: Path, arch: str) -> dict[str, float]:
    """Two parts of an SFT step, timed alone on one full row: its five screenshots through the
    image processor (on the CPU, where dataloader workers run it), and through a vision tower of
    the base's architecture (random weights), by transformers' one attention call a window and
    by Tandem's frozen tower (``window_attention``: one call a window size)."""
    import pyarrow.parquet as pq  # weight: pyarrow, only when the benchmark runs
    from PIL import Image  # weight: Pillow, as above
    from transformers import AutoConfig  # weight: transformers, as above
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (  # weight: as above
        Qwen2_5_VisionTransformerPretrainedModel,
    )

    from model_serving.training import trainer  # weight: torch, TRL
    from model_serving.training.vision import FrozenVisionTower  # weight: torch

    row = next(r for r in pq.read_table(parquet).to_pylist() if len(r["images"]) == HISTORY)
    images = [Image.open(io.BytesIO(image["bytes"])).convert("RGB") for image in row["images"]]
    processor = trainer.load_processor(str(base)).image_processor
    started = time.perf_counter()
    inputs = processor(images=images, return_tensors="pt")
    preprocess = time.perf_counter() - started

    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    config = AutoConfig.from_pretrained(base).vision_config
    config._attn_implementation = trainer.attention()
    with torch.device(device):
        tower = Qwen2_5_VisionTransformerPretrainedModel._from_config(config, dtype=dtype)
    tower.requires_grad_(False)
    pixels = inputs["pixel_values"].to(device, dtype)
    grid = inputs["image_grid_thw"].to(device)

    def seconds(run: Any) -> float:
        times = []
        for _ in range(3):
            if cuda:
                torch.cuda.synchronize()
            started = time.perf_counter()
            with torch.no_grad():
                run()
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
        return min(times[1:])

    own = seconds(lambda: tower(pixels, grid))
    frozen = FrozenVisionTower.wrap(tower)  # no cache across steps: every run encodes
    batched = seconds(lambda: (frozen.new_step(), tower(pixels, grid)))
    return {
        f"gpu_preprocess_s_per_row_{arch}": round(preprocess, 3),
        f"gpu_vision_s_per_row_own_{arch}": round(own, 3),
        f"gpu_vision_s_per_row_{arch}": round(batched, 3),
    }


def parameters(base: Path) -> int:
    """The base's parameters, counted on an empty (meta) copy."""
    from transformers import AutoConfig, AutoModelForImageTextToText  # weight: transformers

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(base))
    return sum(p.numel() for p in model.parameters())


def matmul_flops() -> float:
    """The device's measured matmul rate: bf16 on a GPU, float32 on the CPU."""
    cuda = torch.cuda.is_available()
    n, dtype = (8192, torch.bfloat16) if cuda else (512, torch.float32)
    a = torch.randn(n, n, dtype=dtype, device="cuda" if cuda else "cpu")
    for _ in range(3):
        a @ a
    if cuda:
        torch.cuda.synchronize()
    started, runs = time.perf_counter(), 10
    for _ in range(runs):
        a @ a
    if cuda:
        torch.cuda.synchronize()
    return 2 * n**3 * runs / (time.perf_counter() - started)


def device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", nargs="+", default=None, help="7b, 3b or tiny")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument(
        "--prepare", type=Path, help="only export the rows into this folder (needs the database)"
    )
    parser.add_argument(
        "--episodes",
        type=int,
        help="episodes of 16 steps to export, six SFT and six DPO rows each with a full history "
        "window (default: as many as --steps rows need)",
    )
    parser.add_argument(
        "--rows", type=Path, help="train on rows an earlier --prepare wrote (no database needed)"
    )
    parser.add_argument("--results", type=Path, default=RESULTS_PATH)
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also run SFT with uncheckpointed_layers, without the vision cache, with attention "
        "recomputed, with cuDNN's attention first and Liger's kernels (on a GPU) and with "
        "PyTorch's fused rms_norm",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help=f"profile the last {PROFILED} steps of SFT and DPO; the tables go to this folder",
    )
    options = parser.parse_args()
    archs = options.arch or (["7b", "3b"] if torch.cuda.is_available() else ["tiny"])
    if options.rows:
        return measure(archs, options, saved_rows(options.rows))

    from django.test.utils import override_settings  # Django: configured just below

    from tests.bench import fresh_database, setup_django

    setup_django()
    with tempfile.TemporaryDirectory() as folder, fresh_database():
        root = Path(folder)
        with override_settings(
            MEDIA_ROOT=root / "media", TANDEM_EXPORT_STAGING_ROOT=root / "staging"
        ):
            rows = export_rows(options.prepare or root / "rows", options.steps, options.episodes)
            if options.prepare:
                print(f"rows written to {options.prepare}")
                return 0
            return measure(archs, options, rows)


def measure(archs: list[str], options: argparse.Namespace, rows: dict[str, Any]) -> int:
    """Train each architecture on ``rows``; the table, and the figures written after each."""
    figures: dict[str, Any] = {}
    if options.profile:
        options.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for arch in archs:
            print(f"bench-gpu: {arch} on {device_name()}", file=sys.stderr, flush=True)
            figures |= run_architecture(
                arch, Path(folder) / arch, options.steps, rows, options.profile, options.variants
            )
            options.results.write_text(json.dumps(figures, indent=2) + "\n")
            shutil.rmtree(Path(folder) / arch)  # a 7B's weights take 16 GiB of disk
    for key, value in figures.items():
        print(f"{key:<36} {value:>12}  {GOALS.get(key, '')}")
    print(f"\nWritten to {options.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
