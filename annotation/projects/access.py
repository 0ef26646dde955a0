"""Project-scoped access: which projects, episodes and desktops a user may see, and what they
may do.

Someone who is not a member of a project gets "not found" for everything in it (its existence
is not revealed); a member whose role lacks the capability gets "permission denied". A request
that names a project is authorised before anything else in it is read, so that what a
non-member is told never depends on what exists.
"""

from typing import Any

from django.db.models import F, Q, QuerySet
from django.http import Http404
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.fields import empty

from annotation.models import Episode, EpisodeMode, Membership, Project, Task, TaskStatus
from backend.accounts.models import User
from backend.accounts.roles import ROLE_CAPABILITIES, Capability, Role, role_allows
from vm_pool.models import Desktop, DesktopStatus


def _roles_with(capability: Capability) -> list[str]:
    return [role.value for role, caps in ROLE_CAPABILITIES.items() if capability in caps]


def role_in(user: User, project: Project) -> str | None:
    return (
        Membership.objects.filter(user=user, project=project).values_list("role", flat=True).first()
    )


def visible_projects(user: User) -> QuerySet[Project]:
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def projects_where(user: User, capability: Capability) -> QuerySet[Project]:
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(
        memberships__user=user, memberships__role__in=_roles_with(capability)
    )


def allows(user: User, project: Project, capability: Capability) -> bool:
    return user.is_superuser or role_allows(role_in(user, project), capability)


def require(user: User, project: Project, capability: Capability) -> None:
    """Raise 404 for non-members and 403 for members whose role lacks ``capability``."""
    if user.is_superuser:
        return
    role = role_in(user, project)
    if role is None:
        raise Http404("No such project.")
    if capability not in ROLE_CAPABILITIES[Role(role)]:
        raise PermissionDenied(f"A project {role} may not do this ({capability.value}).")


def project_named_in(body: Any, user: User, capability: Capability) -> Project:
    """The project a request body names in ``project``, authorised before the rest of the body
    is validated. A missing or malformed id is refused as such, the same for everyone; then
    "not found" to non-members (whether or not the project exists), "permission denied" to
    members without ``capability``."""
    named = body.get("project", empty) if isinstance(body, dict) else empty
    try:
        pk = serializers.IntegerField().run_validation(named)
    except ValidationError as error:
        raise ValidationError({"project": error.detail}) from error
    return project_by_id(user, pk, capability)


def project_by_id(user: User, pk: int, capability: Capability) -> Project:
    """The project ``pk``, authorised: "not found" to non-members (whether or not it exists),
    "permission denied" to members without ``capability``."""
    project = visible_projects(user).filter(pk=pk).first()
    if project is None:
        raise Http404("No such project.")
    require(user, project, capability)
    return project


def visible_tasks(user: User) -> QuerySet[Task]:
    """All tasks of projects the user oversees, plus the tasks they hold or are assigned now.
    A task they worked on and left is not theirs to read: what became of it (gold again, back in
    the pool for overlap) would tell them of a quality check."""
    if user.is_superuser:
        return Task.objects.all()
    overseen = Q(project__in=projects_where(user, Capability.VIEW_EPISODES)) | Q(
        project__in=projects_where(user, Capability.MANAGE_TASKS)
    )
    own = Q(
        project__in=projects_where(user, Capability.WORK_QUEUE),
        assignee=user,
        status__in=[TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS],
    )
    return Task.objects.filter(overseen | own)


def visible_episodes(user: User) -> QuerySet[Episode]:
    """Episodes of projects the user may view, the rollouts of projects whose datasets they
    read (the rollout API's rule), plus their own; never another annotator's."""
    if user.is_superuser:
        return Episode.objects.all()
    viewable = projects_where(user, Capability.VIEW_EPISODES)
    rollouts = Q(
        mode=EpisodeMode.AUTONOMOUS,
        task__project__in=projects_where(user, Capability.READ_DATASETS),
    )
    return Episode.objects.filter(Q(task__project__in=viewable) | rollouts | Q(annotator=user))


def visible_desktops(user: User) -> QuerySet[Desktop]:
    """The desktop a user holds, and the desktops of the running episodes they may see (the rule
    of ``visible_episodes``) while the episode still owns them; admins see the whole pool."""
    if user.is_superuser:
        return Desktop.objects.all()
    # The episode owns its desktop at the generation it leased, while its annotator holds it.
    watched = visible_episodes(user).filter(
        ended_at__isnull=True,
        desktop__status=DesktopStatus.LEASED,
        desktop__leased_by=F("annotator"),
        desktop__generation=F("desktop_generation"),
    )
    return Desktop.objects.filter(status=DesktopStatus.LEASED).filter(
        Q(leased_by=user) | Q(pk__in=watched.values("desktop_id"))
    )
