"""Dataset exports: ``export_steps_per_s``, ``export_peak_rss_mb_10k``,
``export_peak_rss_mb_100k`` and ``export_speedup_vs_naive``.

Synthetic episodes (``tests.support.export_data``: 20 decided steps each, cycling accepted,
corrected, error_kept and the reflective step, 8 distinct 64x40 screenshots in local storage) are
inserted in bulk: 10,000 steps, then 100,000 more in a second project. An *export run* is what the
export job does for the SFT and then the DPO export of a project, in TRL format
(``annotation.datasets.exports.build_export``: the pair builder streamed, rows rendered, screenshots
read from storage and embedded, Parquet shards written, published to storage).

- ``export_steps_per_s``: the project's steps / the run's seconds, on the 10k project (median of
  three runs).
- ``export_peak_rss_mb_10k`` / ``_100k``: peak resident memory of a child process (Django set
  up, the export job's modules imported) that does one run on that project: the job's memory,
  measured apart from this process.
- ``export_speedup_vs_naive``: the naive exporter's seconds / Tandem's, same 10k data, same
  run. The naive exporter builds every sample in memory first (``list(iter_samples(…))``),
  renders the same rows, reads each screenshot from storage as it needs it and embeds it as
  base64, then ``json.dump``s the whole list.
"""

import base64
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage
from django.test.utils import override_settings

GOALS = {
    "export_steps_per_s": "≥ 5000",
    "export_peak_rss_mb_100k": "≤ 1.2 × 10k",
    "export_speedup_vs_naive": "≥ 1",
}
STEPS_PER_EPISODE = 20
SMALL, LARGE = 10_000, 100_000
RUNS = 3


def _project(name: str, steps: int) -> int:
    from annotation.models import Membership, Project
    from backend.accounts.models import User
    from backend.accounts.roles import Role
    from tests.support.export_data import make_episodes

    project = Project.objects.create(name=name)
    annotator, _ = User.objects.get_or_create(username="bench-annotator")
    Membership.objects.create(project=project, user=annotator, role=Role.ANNOTATOR)
    make_episodes(project, annotator, steps // STEPS_PER_EPISODE, STEPS_PER_EPISODE)
    return project.pk


def export_run(project_id: int) -> float:
    """One SFT and one DPO export of the project, as the job does them; returns the seconds."""
    from annotation.datasets import exports
    from annotation.models import DatasetExport, Project
    from backend.accounts.models import User

    creator, _ = User.objects.get_or_create(username="bench-engineer")
    project = Project.objects.get(pk=project_id)
    started = time.perf_counter()
    for kind in ("sft", "dpo"):
        export = exports.create_export(project, creator, kind, "trl", exports.ExportFilters())
        exports.build_export(export.pk)
        export.refresh_from_db()
        if export.status != DatasetExport.Status.SUCCEEDED:
            raise RuntimeError(f"export {export.pk} {export.status}: {export.error}")
    return time.perf_counter() - started


def naive_run(project_id: int, out: Path) -> float:
    """Everything in memory, then one ``json.dump``: the anchor."""
    from annotation.datasets.formats.conversation import Renderer
    from annotation.datasets.formats.trl import row_for
    from annotation.datasets.pairs import iter_samples
    from annotation.datasets.records import Filters
    from vm_pool.models import Screenshot

    started = time.perf_counter()
    for kind in ("sft", "dpo"):
        records = list(iter_samples(Filters(project_id), kind))
        renderer = Renderer("uitars15")
        rows = []
        for record in records:
            row, shas = row_for(record, kind, renderer)  # type: ignore[arg-type]
            images = []
            for sha in shas:
                name = Screenshot.objects.values_list("file", flat=True).get(pk=sha)
                with default_storage.open(name, "rb") as stream:
                    images.append(base64.b64encode(stream.read()).decode("ascii"))
            rows.append({**row, "images": images})
        with (out / f"naive-{kind}.json").open("w") as stream:
            json.dump(rows, stream)
    return time.perf_counter() - started


def _peak_rss_mb(project_id: int) -> float:
    """One export run in a child process; its peak resident memory in MB."""
    env = dict(os.environ)
    env["TANDEM_DB_NAME"] = settings.DATABASES["default"]["NAME"]
    env["TANDEM_MEDIA_ROOT"] = str(settings.MEDIA_ROOT)
    env["TANDEM_EXPORT_STAGING_ROOT"] = str(settings.TANDEM_EXPORT_STAGING_ROOT)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.export", str(project_id)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the export child failed:\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_mb"])


def run() -> dict[str, float]:
    from tests.bench import fresh_database

    with tempfile.TemporaryDirectory() as folder, fresh_database():
        media, staging = Path(folder) / "media", Path(folder) / "staging"
        with override_settings(MEDIA_ROOT=media, TANDEM_EXPORT_STAGING_ROOT=staging):
            small = _project("Export benchmark 10k", SMALL)
            seconds = statistics.median(export_run(small) for _ in range(RUNS))
            naive = naive_run(small, Path(folder))
            rss_small = _peak_rss_mb(small)
            large = _project("Export benchmark 100k", LARGE)
            rss_large = _peak_rss_mb(large)
    return {
        "export_steps_per_s": SMALL / seconds,
        "export_peak_rss_mb_10k": rss_small,
        "export_peak_rss_mb_100k": rss_large,
        "export_speedup_vs_naive": naive / seconds,
    }


def _child(project_id: int) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    django.setup()
    export_run(project_id)
    # ru_maxrss is in kilobytes on Linux.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_rss_mb": peak}))


if __name__ == "__main__":
    _child(int(sys.argv[1]))
