"""The rollout API: every endpoint × every role, bad batch requests that get a clear 400 and
store nothing, steering, and the project's validation settings with a write-only judge key
bound to the judge's endpoint.

Managers and engineers start and steer batches (``run_rollouts``); reviewers read them; an
annotator is refused (403 where the project is named, 404 where the batch is looked up among
those they may read); non-members get 404, anonymous callers 401. Rollouts' episodes are read
by those who read the batch, people's episodes stay their overseers'. No job runs here: a
created batch stays queued.
"""

import threading

import pytest
from django.utils import timezone

from annotation.models import (
    BatchStatus,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Project,
    Rollout,
    RolloutBatch,
    RolloutStatus,
    Task,
)
from backend.accounts.roles import Role
from model_serving.models import ModelVersion
from vm_pool.models import DesktopTemplate

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "outsider", "annotator", "reviewer", "manager", "engineer", "admin"]
READERS = {"anonymous": 401, "outsider": 404, "annotator": 404}
SECRET = "sk-judge-secret"


@pytest.fixture
def world(make_user, project, other_project):
    users = {
        "annotator": make_user("annotator", project, Role.ANNOTATOR),
        "reviewer": make_user("reviewer", project, Role.REVIEWER),
        "manager": make_user("manager", project, Role.MANAGER),
        "engineer": make_user("engineer", project, Role.ENGINEER),
        "outsider": make_user("outsider", other_project, Role.ENGINEER),
        "admin": make_user("admin", is_superuser=True, is_staff=True),
    }
    DesktopTemplate.objects.create(name=project.environment_template, min_ready=0)
    for external_id in ("t1", "t2", "t3"):
        Task.objects.create(
            project=project, external_id=external_id, instruction=f"Do {external_id}"
        )
    Task.objects.create(
        project=project, external_id="blocked", instruction="Needs a file", cannot_run="no file"
    )
    served = ModelVersion.objects.create(
        name="ui-tars-a", base_model="ui-tars", serving_status=ModelVersion.Serving.SERVING
    )
    ModelVersion.objects.create(name="ui-tars-registered", base_model="ui-tars")
    batch = RolloutBatch.objects.create(
        project=project,
        model_version=served,
        task_ids=[Task.objects.get(external_id="t1").pk],
        samples_per_task=1,
        created_by=users["manager"],
    )
    episode = Episode.objects.create(
        task=Task.objects.get(external_id="t1"),
        mode=EpisodeMode.AUTONOMOUS,
        annotator=users["manager"],
        model_version="ui-tars-a",
        ended_at=timezone.now(),
        outcome=EpisodeOutcome.FINISHED,
    )
    rollout = Rollout.objects.create(
        batch=batch,
        task=episode.task,
        sample=0,
        episode=episode,
        status=RolloutStatus.VALIDATED,
        stop_reason="finished",
        verdict=True,
        validation={"parts": [{"name": "rules", "passed": True, "reason": "ok", "details": {}}]},
    )
    return users, batch, rollout


CREATE = {"model_version": "ui-tars-a", "samples_per_task": 2, "tasks": ["t1", "t2"]}
ENDPOINTS = [
    ("list", "get", "/api/rollout-batches/?project={p}", None, {"anonymous": 401}, 200),
    ("retrieve", "get", "/api/rollout-batches/{b}/", None, READERS, 200),
    (
        "create",
        "post",
        "/api/rollout-batches/",
        CREATE,
        {"anonymous": 401, "outsider": 404, "manager": 201, "engineer": 201, "admin": 201},
        403,
    ),
    ("pause", "post", "/api/rollout-batches/{b}/pause/", None, {**READERS, "reviewer": 403}, 200),
    ("cancel", "post", "/api/rollout-batches/{b}/cancel/", None, {**READERS, "reviewer": 403}, 200),
    (
        "runnable tasks",
        "get",
        "/api/rollout-batches/tasks/?project={p}",
        None,
        {"anonymous": 401, "outsider": 404, "manager": 200, "engineer": 200, "admin": 200},
        403,
    ),
    ("rollout list", "get", "/api/rollouts/?batch={b}", None, {"anonymous": 401}, 200),
    ("rollout", "get", "/api/rollouts/{r}/", None, READERS, 200),
    (
        "validation read",
        "get",
        "/api/projects/{p}/validation/",
        None,
        {"anonymous": 401, "outsider": 404, "annotator": 403},
        200,
    ),
    (
        "validation write",
        "put",
        "/api/projects/{p}/validation/",
        {"min_task_success": 0.5},
        {"anonymous": 401, "outsider": 404, "annotator": 403, "reviewer": 403},
        200,
    ),
]

CASES = [
    pytest.param(method, path, body, role, expected.get(role, default), id=f"{name}-{role}")
    for name, method, path, body, expected, default in ENDPOINTS
    for role in ROLES
]


@pytest.mark.parametrize(("method", "path", "body", "role", "expected"), CASES)
def test_endpoint_allows_or_denies_each_role(
    world, project, client_for, method, path, body, role, expected
):
    users, batch, rollout = world
    client = client_for(None if role == "anonymous" else users[role])
    url = path.format(p=project.pk, b=batch.pk, r=rollout.pk)
    if body is not None and method == "post":
        body = {**body, "project": project.pk}
    response = getattr(client, method)(url, body, format="json")
    assert response.status_code == expected, response.content
    if expected >= 400:
        assert response.json()["error"]["status"] == expected


def test_lists_hold_only_the_batches_and_rollouts_the_user_may_read(world, client_for):
    users, batch, rollout = world

    def ids(role, path):
        return [row["id"] for row in client_for(users[role]).get(path).json()["results"]]

    for role in ("reviewer", "manager", "engineer", "admin"):
        assert ids(role, "/api/rollout-batches/") == [batch.pk], role
        assert ids(role, f"/api/rollouts/?batch={batch.pk}") == [rollout.pk], role
    for role in ("annotator", "outsider"):
        assert ids(role, "/api/rollout-batches/") == [], role
        assert ids(role, "/api/rollouts/") == [], role


def test_a_batch_is_read_with_its_summary(world, client_for):
    users, batch, rollout = world
    shown = client_for(users["reviewer"]).get(f"/api/rollout-batches/{batch.pk}/").json()
    assert (shown["model_version"], shown["tasks"], shown["created_by"]) == (
        "ui-tars-a",
        1,
        "manager",
    )
    assert shown["pass_at_k"] == 1.0 and shown["k"] == 1
    assert shown["success"] == {
        "rollouts": 1,
        "validated": 1,
        "passed": 1,
        "success_rate": 1.0,
        "task_success": None,
    }
    assert shown["verdicts"] == {"rules": {"passed": 1}}
    assert shown["stop_reasons"] == {"finished": 1}


def test_an_engineer_reads_a_rollouts_episode_but_not_a_persons(world, client_for, project):
    users, batch, rollout = world
    person = Episode.objects.create(
        task=Task.objects.get(external_id="t2"), annotator=users["annotator"]
    )
    engineer = client_for(users["engineer"])

    shown = engineer.get(f"/api/episodes/{rollout.episode_id}/")
    assert shown.status_code == 200, shown.content
    body = shown.json()
    assert (body["mode"], body["rollout"], body["rollout_batch"]) == (
        "autonomous",
        rollout.pk,
        batch.pk,
    )
    assert engineer.get(f"/api/episodes/{person.pk}/").status_code == 404
    assert [e["id"] for e in engineer.get("/api/episodes/").json()["results"]] == [
        rollout.episode_id
    ]
    # The annotator's own episode says it is no rollout.
    own = client_for(users["annotator"]).get(f"/api/episodes/{person.pk}/").json()
    assert (own["mode"], own["rollout"], own["rollout_batch"]) == ("interactive", None, None)
    assert (
        client_for(users["annotator"]).get(f"/api/episodes/{rollout.episode_id}/").status_code
        == 404
    )


def test_a_manager_starts_a_batch_of_chosen_tasks_and_an_engineer_of_all_runnable_ones(
    world, project, client_for
):
    users, _, _ = world
    body = {"project": project.pk, **CREATE, "name": "smoke", "sampling": {"temperature": 0.7}}
    response = client_for(users["manager"]).post("/api/rollout-batches/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["counts"] == {"total": 4, "queued": 4, "passed": 0, "failed": 0}
    batch = RolloutBatch.objects.get(pk=response.json()["id"])
    assert (batch.status, batch.name, batch.created_by.username) == ("queued", "smoke", "manager")
    assert batch.counts == {"total": 4, "queued": 4, "passed": 0, "failed": 0}
    assert sorted(batch.rollouts.values_list("task__external_id", "sample", "status")) == [
        (t, s, "queued") for t in ("t1", "t2") for s in (0, 1)
    ]

    everything = {"project": project.pk, "model_version": "ui-tars-a", "samples_per_task": 1}
    response = client_for(users["engineer"]).post(
        "/api/rollout-batches/", everything, format="json"
    )
    assert response.status_code == 201, response.content
    ran = RolloutBatch.objects.get(pk=response.json()["id"])
    assert sorted(ran.rollouts.values_list("task__external_id", flat=True)) == ["t1", "t2", "t3"]


def test_the_runnable_tasks_leave_out_those_that_cannot_run(world, project, client_for):
    users, _, _ = world
    shown = client_for(users["engineer"]).get(f"/api/rollout-batches/tasks/?project={project.pk}")
    assert shown.json() == {
        "runnable": [
            {"external_id": t, "instruction": f"Do {t}", "max_steps": 30}
            for t in ("t1", "t2", "t3")
        ],
        "cannot_run": 1,
    }
    missing = client_for(users["engineer"]).get("/api/rollout-batches/tasks/")
    assert missing.status_code == 400 and "project" in missing.json()["error"]["details"]


BAD_CREATES = [
    pytest.param({"tasks": ["t1", "nope"]}, "no runnable task nope", id="unknown-task"),
    pytest.param({"tasks": ["blocked"]}, "no runnable task blocked", id="task-that-cannot-run"),
    pytest.param(
        {"version_b": "ui-tars-registered", "version_b_share": 0.5},
        "model version ui-tars-registered is registered, not served",
        id="b-not-served",
    ),
    pytest.param({"model_version": "ui-tars-registered"}, "not served", id="a-not-served"),
    pytest.param(
        {"stop_rules": {"same_action_repeats": 1}},
        "stop rules: same_action_repeats must be a whole number from 2 to 500, not 1",
        id="loop-of-one",
    ),
    pytest.param(
        {"stop_rules": {"patience": 3}},
        "stop rules: unknown stop rule(s): patience",
        id="unknown-stop-rule",
    ),
    pytest.param(
        {"stop_rules": {"invalid_in_row": "three"}},
        "invalid_in_row must be a whole number from 1 to 500, not 'three'",
        id="stop-rule-not-a-number",
    ),
    pytest.param(
        {"sampling": {"seed": 1}}, "unknown sampling settings ['seed']", id="sampling-key"
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD_CREATES)
def test_a_bad_batch_is_refused_with_its_reason_and_nothing_is_stored(
    world, project, client_for, change, message
):
    users, _, _ = world
    before = (RolloutBatch.objects.count(), Rollout.objects.count())
    body = {"project": project.pk, **CREATE, **change}
    response = client_for(users["engineer"]).post("/api/rollout-batches/", body, format="json")
    assert response.status_code == 400, response.content
    assert message in response.json()["error"]["message"], response.json()
    assert (RolloutBatch.objects.count(), Rollout.objects.count()) == before


BAD_FIELDS = [
    pytest.param({"model_version": "no-such-version"}, "model_version", id="unknown-version"),
    pytest.param({"samples_per_task": 0}, "samples_per_task", id="no-samples"),
    pytest.param({"samples_per_task": 17}, "samples_per_task", id="too-many-samples"),
    pytest.param({"desktop_share": 0}, "desktop_share", id="no-desktops"),
    pytest.param({"max_concurrent": 65}, "max_concurrent", id="too-concurrent"),
    pytest.param({"tasks": []}, "tasks", id="no-tasks"),
    pytest.param({"sampling": {"temperature": "hot"}}, "sampling", id="temperature-word"),
    pytest.param({"sampling": {"temperature": 3}}, "sampling", id="temperature-too-high"),
    pytest.param({"sampling": {"max_tokens": 0.5}}, "sampling", id="max-tokens-fraction"),
]


@pytest.mark.parametrize(("change", "field"), BAD_FIELDS)
def test_bad_fields_are_refused_by_name_and_nothing_is_stored(
    world, project, client_for, change, field
):
    users, _, _ = world
    before = (RolloutBatch.objects.count(), Rollout.objects.count())
    body = {"project": project.pk, **CREATE, **change}
    response = client_for(users["manager"]).post("/api/rollout-batches/", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["details"], error
    assert (RolloutBatch.objects.count(), Rollout.objects.count()) == before


def test_the_temperature_error_says_its_range(world, project, client_for):
    users, _, _ = world
    body = {"project": project.pk, **CREATE, "sampling": {"temperature": 3}}
    response = client_for(users["manager"]).post("/api/rollout-batches/", body, format="json")
    assert response.json()["error"]["details"]["sampling"] == [
        "temperature must be a number from 0 to 2, not 3"
    ]


def test_a_batch_is_paused_resumed_and_cancelled_and_an_ended_one_refuses(
    world, client_for, project
):
    users, _, _ = world
    engineer = client_for(users["engineer"])
    created = engineer.post(
        "/api/rollout-batches/", {"project": project.pk, **CREATE}, format="json"
    ).json()
    url = f"/api/rollout-batches/{created['id']}"

    assert engineer.post(f"{url}/resume/").status_code == 400  # not paused
    assert engineer.post(f"{url}/pause/").json()["status"] == BatchStatus.PAUSED
    assert engineer.post(f"{url}/resume/").json()["status"] == BatchStatus.RUNNING
    cancelled = engineer.post(f"{url}/cancel/").json()
    assert cancelled["status"] == BatchStatus.CANCELLED and cancelled["progress"] == 1.0
    assert set(Rollout.objects.filter(batch_id=created["id"]).values_list("status", flat=True)) == {
        RolloutStatus.CANCELLED
    }
    refused = engineer.post(f"{url}/pause/")
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "a cancelled batch cannot become paused"


def test_tokens_need_the_models_scopes(world, project, token_client_for):
    users, batch, _ = world
    reader, _ = token_client_for(users["engineer"], ["models:read"])
    writer, _ = token_client_for(users["engineer"], ["models:write"])
    other, _ = token_client_for(users["engineer"], ["episodes:read", "datasets:write"])
    body = {"project": project.pk, **CREATE}
    assert reader.get(f"/api/rollout-batches/{batch.pk}/").status_code == 200
    assert reader.post("/api/rollout-batches/", body, format="json").status_code == 403
    assert other.get("/api/rollout-batches/").status_code == 403
    assert writer.post("/api/rollout-batches/", body, format="json").status_code == 201


# --- validation settings --------------------------------------------------------------------


def test_the_judge_key_is_written_never_read_and_kept_until_replaced_or_removed(
    world, project, client_for
):
    users, _, _ = world
    manager = client_for(users["manager"])
    url = f"/api/projects/{project.pk}/validation/"
    judge = {"base_url": "http://judge:8000/v1", "model": "qwen2.5-vl-72b", "threshold": 0.6}
    given = {"min_task_success": 0.5, "human_review": True, "judge": {**judge, "api_key": SECRET}}

    saved = manager.put(url, given, format="json")
    assert saved.status_code == 200, saved.content
    expected = {
        "min_task_success": 0.5,
        "human_review": True,
        "judge": {**judge, "api_key_set": True},
    }
    assert saved.json() == expected
    assert SECRET not in saved.content.decode()
    read = client_for(users["reviewer"]).get(url)
    assert read.json() == expected and SECRET not in read.content.decode()
    assert Project.objects.get(pk=project.pk).validation_settings["judge"]["api_key"] == SECRET

    # Sent back as it was read, or with the key left out: the stored key stays.
    assert manager.put(url, read.json(), format="json").json() == expected
    assert manager.put(url, {"judge": judge}, format="json").json()["judge"]["api_key_set"]
    assert stored_judge(project)["api_key"] == SECRET

    cleared = manager.put(url, {"judge": {**judge, "api_key": ""}}, format="json")
    assert cleared.json()["judge"]["api_key_set"] is False
    assert "api_key" not in stored_judge(project)


def stored_judge(project: Project) -> dict:
    return Project.objects.get(pk=project.pk).validation_settings["judge"]


JUDGE = {"base_url": "http://judge:8000/v1", "model": "qwen2.5-vl-72b", "threshold": 0.6}


@pytest.fixture
def keyed_judge(world, project, client_for):
    """The manager's client, the validation URL, and a judge stored with the manager's key."""
    users, _, _ = world
    manager = client_for(users["manager"])
    url = f"/api/projects/{project.pk}/validation/"
    saved = manager.put(url, {"judge": {**JUDGE, "api_key": SECRET}}, format="json")
    assert saved.json()["judge"]["api_key_set"] is True
    return users, manager, url


@pytest.mark.parametrize(
    "moved_to",
    [
        "http://judge-2:8000/v1",  # another host
        "http://judge:8001/v1",  # another port
        "https://judge:8000/v1",  # another scheme
        "http://judge:8000/v2",  # another path
    ],
)
def test_re_pointing_the_judge_without_a_key_clears_the_stored_key(
    keyed_judge, project, client_for, moved_to
):
    users, _, url = keyed_judge
    engineer = client_for(users["engineer"])
    read = engineer.get(url).json()  # sent back with the api_key_set marker the read shows
    moved = engineer.put(url, {"judge": {**read["judge"], "base_url": moved_to}}, format="json")
    assert moved.status_code == 200, moved.content
    assert moved.json()["judge"] == {**JUDGE, "base_url": moved_to, "api_key_set": False}
    assert stored_judge(project) == {**JUDGE, "base_url": moved_to}


def test_re_pointing_the_judge_with_a_key_in_the_same_request_keeps_the_new_key(
    keyed_judge, project
):
    _, manager, url = keyed_judge
    moved = {**JUDGE, "base_url": "http://judge-2:8000/v1", "api_key": "sk-judge-2"}
    assert manager.put(url, {"judge": moved}, format="json").json()["judge"]["api_key_set"]
    assert stored_judge(project) == moved


@pytest.mark.parametrize(
    "same", ["http://judge:8000/v1", "http://judge:8000/v1/", "HTTP://Judge:8000/v1"]
)
def test_a_judge_write_to_the_same_endpoint_without_a_key_keeps_it(keyed_judge, project, same):
    _, manager, url = keyed_judge
    rewritten = {**JUDGE, "base_url": same, "threshold": 0.8}
    written = manager.put(url, {"judge": rewritten}, format="json")
    assert written.json()["judge"]["api_key_set"] is True
    assert stored_judge(project)["api_key"] == SECRET


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        (
            {**JUDGE, "base_url": "judge:8000/v1"},
            "judge.base_url must be an http:// or https:// URL with a host, not 'judge:8000/v1'",
        ),
        (
            {**JUDGE, "base_url": "http://judge:99999/v1"},
            "judge.base_url must be an http:// or https:// URL with a host, "
            "not 'http://judge:99999/v1'",
        ),
        ({**JUDGE, "api_key": 42}, "judge.api_key is a string"),
    ],
)
def test_a_bad_judge_endpoint_or_key_is_refused_and_the_stored_key_kept(
    keyed_judge, project, judge, message
):
    _, manager, url = keyed_judge
    response = manager.put(url, {"judge": judge}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"] == message
    assert stored_judge(project) == {**JUDGE, "api_key": SECRET}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"min_task_success": 2}, "min_task_success is a score from 0 to 1"),
        ({"human_review": "yes"}, "human_review is true or false"),
        ({"judge": {"base_url": "http://j/v1"}}, "judge needs base_url and model"),
        (
            {"judge": {"base_url": "http://j/v1", "model": "m", "threshold": 1.5}},
            "judge.threshold is a score from 0 to 1",
        ),
        ({"colour": "blue"}, "unknown validation settings ['colour']"),
    ],
)
def test_bad_validation_settings_are_refused_and_the_stored_ones_kept(
    world, project, client_for, given, message
):
    users, _, _ = world
    Project.objects.filter(pk=project.pk).update(validation_settings={"human_review": True})
    response = client_for(users["engineer"]).put(
        f"/api/projects/{project.pk}/validation/", given, format="json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"] == message
    assert Project.objects.get(pk=project.pk).validation_settings == {"human_review": True}


@pytest.mark.django_db(transaction=True)
def test_a_count_waits_for_a_change_made_under_the_batchs_lock_and_counts_it(world):
    """Two rollouts validated at once: the batch's counts are taken under its row lock, so a
    count that starts while another transaction holds the lock (and changes a rollout) waits
    for it and counts its change, never writing a count that misses it."""
    from django.db import connection, transaction

    from annotation.rollouts.batches import refresh_counts

    users, batch, rollout = world
    other = Rollout.objects.create(
        batch=batch, task=rollout.task, sample=1, status=RolloutStatus.ENDED
    )
    locked, counted = threading.Event(), threading.Event()

    def validate_under_the_lock() -> None:
        try:
            with transaction.atomic():
                RolloutBatch.objects.select_for_update().get(pk=batch.pk)
                Rollout.objects.filter(pk=other.pk).update(
                    status=RolloutStatus.VALIDATED, verdict=False
                )
                locked.set()
                # The count below must not finish while this change is uncommitted.
                assert not counted.wait(1.0)
        finally:
            connection.close()

    thread = threading.Thread(target=validate_under_the_lock)
    thread.start()
    assert locked.wait(10)
    refresh_counts(batch.pk)
    counted.set()
    thread.join(10)

    batch.refresh_from_db()
    assert (batch.counts["passed"], batch.counts["failed"]) == (1, 1)
    assert batch.counts["total"] == 2 and batch.progress == 1.0
