"""Which model versions a project runs, and which one proposes for an episode.

``model_version`` (A) proposes; ``version_b`` takes ``version_b_share`` of the episodes, chosen
from the episode id (``model_serving.versions``). Without a version A, the project's own model
settings (the baseline, say) are A: the first comparison a project makes is its base against a
fine-tuned version. Only a version whose endpoint was checked to serve it (``serving``) can be
chosen. The chosen version is fixed on the episode when it starts (``Episode.served_version``)
and its name is recorded on the episode and on each proposal. A version a project runs keeps its
endpoint.
"""

from typing import Any

from django.db import transaction
from django.db.models import Q

from annotation.models import Episode, Project
from backend.errors import DomainError
from model_serving.models import ModelVersion
from model_serving.versions import choose_version, proposer_settings


class VersionInUse(DomainError):
    status_code = 409
    code = "version_in_use"


def set_project_versions(
    project: Project,
    model_version: ModelVersion | None,
    version_b: ModelVersion | None,
    version_b_share: float,
) -> Project:
    if not 0 <= version_b_share <= 1:
        raise DomainError("version_b_share is a share of episodes, between 0 and 1")
    if version_b is not None and version_b == model_version:
        raise DomainError("versions A and B are the same version")
    for version in (model_version, version_b):
        if version is not None and version.serving_status != ModelVersion.Serving.SERVING:
            raise DomainError(
                f"model version {version.name} is {version.serving_status}, not served: serve "
                "it first (POST /api/model-versions/{id}/serve/), so its endpoint is checked",
                details={"model_version": version.name, "error": version.serving_error},
            )
    project.model_version = model_version
    project.version_b = version_b
    project.version_b_share = version_b_share if version_b is not None else 0.0
    project.save(update_fields=["model_version", "version_b", "version_b_share"])
    return project


def set_endpoint(version: ModelVersion, base_url: str) -> ModelVersion:
    """Point a version at another endpoint. It is then only registered: *serve* checks the new
    endpoint before any project may choose it. A version a project runs keeps its endpoint."""
    with transaction.atomic():
        version = ModelVersion.objects.select_for_update().get(pk=version.pk)
        if base_url == version.base_url:
            return version
        users = Project.objects.filter(Q(model_version=version) | Q(version_b=version))
        if names := ", ".join(users.values_list("name", flat=True)):
            raise VersionInUse(
                f"model version {version.name} proposes in {names}: choose another version "
                "there before moving it to another endpoint"
            )
        version.base_url = base_url
        version.serving_status = ModelVersion.Serving.REGISTERED
        version.serving_error = ""
        version.served_at = None
        version.save(update_fields=["base_url", "serving_status", "serving_error", "served_at"])
    return version


def assign_version(episode: Episode, project: Project) -> None:
    """Fix the version that proposes for a new episode, and record its name on it. A branch
    task's episode goes on with the rollout's version: its proposals are that version's."""
    source = episode.task.branch_of
    version = (
        source.served_version
        if source is not None
        else choose_version(
            episode.pk, project.model_version, project.version_b, project.version_b_share
        )
    )
    if version is None:
        return
    episode.served_version = version
    episode.model_name = version.served_name
    episode.model_version = version.name
    episode.save(update_fields=["served_version", "model_name", "model_version"])


def project_model_settings(project: Project) -> dict[str, Any]:
    """The proposer settings of the project's version A, else its own model settings."""
    if project.model_version is None:
        return project.model_settings
    return proposer_settings(project.model_settings, project.model_version)


def episode_model_settings(episode: Episode) -> dict[str, Any]:
    """The proposer settings for an episode's steps: its version's, else the project's."""
    project = episode.task.project
    if episode.served_version is None:
        return project.model_settings
    return proposer_settings(project.model_settings, episode.served_version)
