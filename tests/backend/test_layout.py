"""The house's import ladder, checked on every module's source (``ast``), and what the layout
must never change: tables, their app label and the Celery job names.

The rules, each named in the message of an import that breaks it:

- **apps**: ``backend`` (the kernel) imports no app, except its faces (URLs, socket routing,
  the ASGI and WSGI entry points); ``vm_pool`` imports neither ``model_serving`` nor
  ``annotation``; ``model_serving`` does not import ``annotation``.
- **floors**: inside ``annotation`` and ``vm_pool``, a domain module imports from its own room
  and from lower floors only, and rooms on one floor never import each other (``FLOORS``):
  ``annotation``'s ``models`` 0, ``projects`` and ``quality`` 1, ``episodes`` 2, ``rollouts`` and
  ``datasets`` 3, ``flywheel`` 4; ``vm_pool``'s action space and records at the bottom, the pool
  on top.
- **faces**: no domain module imports a face (``jobs``, ``admin``, ``api``, ``serializers``,
  ``consumers``, ``management``, ``demo``, the stream's views, websockify's plugin and its
  proxy with the recording gate). Faces
  import anything below them.
- **circles**: no module reaches itself through imports, at any level of the code.
- **lazy**: an app module is imported inside a function only where ``LAZY`` says why.
"""

import ast
import io
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import call_command

from annotation import job_names
from backend.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]
APPS = ("backend", "vm_pool", "model_serving", "annotation")
FLOORS = {
    "annotation": {"models": 0, "projects": 1, "quality": 1, "episodes": 2, "rollouts": 3,
                   "datasets": 3, "flywheel": 4},
    # The environment: records and the action space at the bottom, the pool on top.
    "vm_pool": {"actions": 0, "devtools": 0, "models": 0, "desktop": 1, "screen": 2,
                "sandbox": 2, "task_files": 2, "x11": 3, "setup": 3, "recording": 3, "agent": 4,
                "evaluation": 4, "agent_client": 5, "providers": 6, "pool": 7},
}  # fmt: skip
FACE_NAMES = {"jobs", "admin", "apps", "api", "serializers", "consumers", "model_api"}
FACE_PARTS = {"management", "demo", "streaming", "websockify_tokens", "proxy"}
KERNEL_FACES = {"backend.urls", "backend.routing", "backend.asgi", "backend.wsgi"}
# Imports inside a function, where they stay and why (module, imported module).
LAZY = {
    (
        "annotation.projects.coverage",
        "vm_pool.evaluation.getters",
    ): "weight: the metrics' libraries",
    (
        "annotation.projects.coverage",
        "vm_pool.evaluation.metrics",
    ): "weight: the metrics' libraries",
    ("annotation.projects.coverage", "vm_pool.evaluation.metrics.table"): "weight: pandas",
    ("model_serving.finetune", "model_serving.training.trainer"): "weight: torch, on GPU hosts",
    ("model_serving.management.commands.demo_model", "model_serving.demo_model"): "weight: torch",
    ("model_serving.management.commands.serve_model", "model_serving.models"): "after setup",
    ("model_serving.management.commands.serve_model", "model_serving.serving"): "after setup",
    ("vm_pool.agent.server", "vm_pool.x11.controller"): "the X stack: container desktops only",
    ("vm_pool.agent.endpoint", "vm_pool.actions"): "the agent loads only what a request needs",
    ("vm_pool.agent.endpoint", "vm_pool.devtools"): "the agent loads only what a request needs",
    ("vm_pool.evaluation.jailed", "vm_pool.evaluation.scoring"): "inside the jail, after limits",
    ("vm_pool.evaluation.getters.files", "vm_pool.setup.windows"): "weight: the desktop toolkit",
    ("vm_pool.providers.local", "vm_pool.x11.controller"): "weight: python-xlib",
    ("vm_pool.setup.base", "vm_pool.screen.compare"): "weight: numpy and the PNG decoder",
    ("vm_pool.setup.base", "vm_pool.screen.capture"): "weight: the capture's encoder",
    ("vm_pool.websockify_tokens", "vm_pool.streaming"): "needs Django's app registry: after setup",
    ("vm_pool.recording.proxy", "vm_pool.pool"): "needs Django's app registry: after setup",
    ("vm_pool.recording.proxy", "vm_pool.models"): "needs Django's app registry: after setup",
    (
        "vm_pool.recording.proxy",
        "vm_pool.recording.gate",
    ): "needs Django's app registry: after setup",
}


def sources() -> dict[str, str]:
    """Every module of the apps, by dotted name (migrations aside: they import no app code)."""
    found = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path.read_text()
    return found


def imports(modules: Mapping[str, str]) -> Iterator[tuple[str, str, int, bool]]:
    """(importer, imported module, line, inside a function) for each import of an app module;
    ``from package import name`` counts as importing ``package.name`` when that is a module."""
    for name, source in modules.items():
        tree = ast.parse(source)
        lazy_lines = {
            node.lineno
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(fn)
            if isinstance(node, ast.Import | ast.ImportFrom)
        }
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [
                    f"{node.module}.{a.name}"
                    if f"{node.module}.{a.name}" in modules
                    else node.module
                    for a in node.names
                ]
            for target in targets:
                if target.split(".")[0] in APPS and target != name:
                    yield name, _known(target, modules), node.lineno, node.lineno in lazy_lines


def _known(target: str, modules: Mapping[str, str]) -> str:
    while target not in modules and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def is_face(module: str) -> bool:
    parts = module.split(".")
    return module in KERNEL_FACES or parts[-1] in FACE_NAMES or bool(FACE_PARTS & set(parts))


def floor_part(module: str) -> str | None:
    """The room of ``module`` when its app has floors (``annotation.episodes``, ``vm_pool.x11``)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] not in FLOORS:
        return None
    room = parts[1]
    return f"{parts[0]}.{room}" if room in FLOORS[parts[0]] else None


def floor(room: str) -> int:
    app, name = room.split(".")
    return FLOORS[app][name]


def broken_rules(modules: Mapping[str, str]) -> list[str]:
    """Every import that breaks a rule, in words naming the rule."""
    problems = []
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for importer, imported, line, lazy in imports(modules):
        graph[importer].add(imported)
        where = f"{importer}:{line} imports {imported}"
        app, other = importer.split(".")[0], imported.split(".")[0]
        order = {"backend": 0, "vm_pool": 1, "model_serving": 2, "annotation": 3}
        if order[other] > order[app] and importer not in KERNEL_FACES:
            problems.append(f"apps: {where}; {app} stands below {other}")
        if app == other and app in FLOORS and not is_face(importer):
            if is_face(imported):
                problems.append(f"faces: {where}, a face; a domain module never imports one")
            mine, theirs = floor_part(importer), floor_part(imported)
            if mine and theirs and mine != theirs and floor(theirs) >= floor(mine):
                problems.append(
                    f"floors: {where}; {mine} (floor {floor(mine)}) may import only lower "
                    f"floors, and {theirs} is floor {floor(theirs)}"
                )
        if lazy and (importer, imported) not in LAZY:
            problems.append(f"lazy: {where} inside a function; import it at the top")
    problems += [f"circles: {' -> '.join(circle)}" for circle in circles(graph)]
    return problems


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One path round each group of modules that import one another (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group) + [sorted(group)[0]])

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_code_keeps_the_ladder():
    assert broken_rules(sources()) == []


@pytest.mark.parametrize(
    ("scratch", "source", "rule"),
    [
        ("annotation.episodes.scratch", "from annotation.flywheel import chart\n", "floors:"),
        ("annotation.rollouts.scratch", "from annotation.datasets import pairs\n", "floors:"),
        ("vm_pool.screen.scratch", "from vm_pool import pool\n", "floors:"),
        ("vm_pool.setup.scratch", "from vm_pool.x11 import controller\n", "floors:"),
        ("annotation.projects.scratch", "from annotation import jobs\n", "faces:"),
        ("vm_pool.scratch", "from annotation.models import Task\n", "apps:"),
        ("model_serving.scratch", "import annotation.episodes.loop\n", "apps:"),
        (
            "annotation.episodes.scratch",
            "def f():\n    from annotation.models import Step\n",
            "lazy:",
        ),
        ("annotation.models.scratch", "from annotation.projects import access\n", "circles:"),
    ],
)
def test_a_wrong_import_in_a_scratch_module_breaks_the_build_naming_its_rule(scratch, source, rule):
    modules = {**sources(), scratch: source}
    if rule == "circles:":  # the models package imports the scratch module, which climbs back
        modules["annotation.models"] += f"\nimport {scratch}\n"
    broken = broken_rules(modules)
    assert broken and all(scratch in problem for problem in broken), broken
    assert any(problem.startswith(rule) for problem in broken), broken


# What the layout must never change: tables (app label and name) and Celery's job names.
TABLES = [
    ("annotation.Agreement", "annotation_agreement"),
    ("annotation.DatasetExport", "annotation_datasetexport"),
    ("annotation.Demonstration", "annotation_demonstration"),
    ("annotation.Episode", "annotation_episode"),
    ("annotation.EvaluatorCheck", "annotation_evaluatorcheck"),
    ("annotation.GoldStep", "annotation_goldstep"),
    ("annotation.GoldVerdict", "annotation_goldverdict"),
    ("annotation.Honeypot", "annotation_honeypot"),
    ("annotation.HoneypotRun", "annotation_honeypotrun"),
    ("annotation.Membership", "annotation_membership"),
    ("annotation.Project", "annotation_project"),
    ("annotation.Proposal", "annotation_proposal"),
    ("annotation.QualityHold", "annotation_qualityhold"),
    ("annotation.Review", "annotation_review"),
    ("annotation.Rollout", "annotation_rollout"),
    ("annotation.RolloutBatch", "annotation_rolloutbatch"),
    ("annotation.Step", "annotation_step"),
    ("annotation.StepRevision", "annotation_steprevision"),
    ("annotation.Task", "annotation_task"),
    ("annotation.TaskEvent", "annotation_taskevent"),
]


def test_tables_keep_their_app_label_and_names():
    models = apps.get_app_config("annotation").get_models()
    assert sorted((m._meta.label, m._meta.db_table) for m in models) == TABLES


JOB_NAMES = [
    "annotation.jobs.build_export",
    "annotation.jobs.check_evaluator",
    "annotation.jobs.check_quality",
    "annotation.jobs.check_replay",
    "annotation.jobs.demonstration_ended",
    "annotation.jobs.dispatch_rollouts",
    "annotation.jobs.draft_thoughts",
    "annotation.jobs.evaluate_episode",
    "annotation.jobs.evaluate_model_version",
    "annotation.jobs.execute_step",
    "annotation.jobs.prepare_episode",
    "annotation.jobs.propose_step",
    "annotation.jobs.return_lapsed_leases",
    "annotation.jobs.run_rollout",
    "annotation.jobs.validate_rollout",
    "model_serving.jobs.run_finetune_job",
    "model_serving.jobs.serve_model_version",
    "vm_pool.jobs.check_all_hosts",
    "vm_pool.jobs.check_host",
    "vm_pool.jobs.maintain_all_hosts",
    "vm_pool.jobs.maintain_host",
    "vm_pool.jobs.reset_desktop",
    "vm_pool.jobs.start_desktop",
    "vm_pool.jobs.store_task_file_archive",
]


def test_celery_job_names_are_unchanged():
    celery_app.loader.import_default_modules()  # the apps' jobs modules, as a worker loads them
    names = sorted(n for n in celery_app.tasks if not n.startswith("celery."))
    assert names == JOB_NAMES


def test_the_apps_jobs_are_named_once_and_the_settings_route_them_as_declared(settings):
    """Every app module names a job through ``annotation.job_names``; the settings' routes
    (used when a job is sent without a queue) and beat schedule agree with it."""
    written = [
        f"{module}: {node.value}"
        for module, source in sources().items()
        if module not in ("annotation.job_names", "backend.settings")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("annotation.jobs.")
    ]
    assert written == []
    declared = {
        value for name, value in vars(job_names).items() if name.isupper() and name != "QUEUES"
    }
    assert declared == {name for name in JOB_NAMES if name.startswith("annotation.")}
    router = celery_app.amqp.router
    for job, queue in job_names.QUEUES.items():
        assert router.route({}, job, args=[1])["queue"].name == queue, job
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {t for t in scheduled if t.startswith("annotation.")} <= declared


@pytest.mark.django_db
def test_the_models_need_no_migration():
    """Moving modules changed no table: Django finds nothing to migrate."""
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
