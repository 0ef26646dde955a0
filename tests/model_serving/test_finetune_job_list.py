"""The list of fine-tuning jobs narrowed to one project, as a project's page reads it."""

import pytest

from backend.accounts.roles import Role
from model_serving.models import FineTuneJob

pytestmark = pytest.mark.django_db


def job(name: str, *project_ids: int) -> FineTuneJob:
    return FineTuneJob.objects.create(
        name=name,
        base_model="b",
        base_model_path="/b",
        stages=[],
        version_name=f"v-{name}",
        project_ids=list(project_ids),
    )


def test_a_projects_jobs_are_those_trained_on_its_exports(
    make_user, client_for, project, other_project
):
    manager = make_user("mona", project, Role.MANAGER)
    own, both = job("own", project.pk), job("both", project.pk, other_project.pk)
    job("elsewhere", other_project.pk)
    client = client_for(manager)

    listed = client.get(f"/api/finetune-jobs/?project={project.pk}").json()["results"]
    assert {j["name"] for j in listed} == {own.name, both.name}
    # Still only the jobs the reader may read: the other project's alone are not theirs.
    other = client.get(f"/api/finetune-jobs/?project={other_project.pk}").json()["results"]
    assert [j["name"] for j in other] == [both.name]


def test_a_project_that_is_not_an_id_is_refused(make_user, client_for, project):
    manager = make_user("mona", project, Role.MANAGER)
    for not_an_id in ("office", "²", "9" * 30):
        refused = client_for(manager).get("/api/finetune-jobs/", {"project": not_an_id})
        assert refused.status_code == 400
        assert "project" in refused.json()["error"]["details"]
