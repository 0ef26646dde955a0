"""Project-scoped access: which projects and episodes a user may see, and what they may do.

Someone who is not a member of a project gets "not found" for everything in it (its existence
is not revealed); a member whose role lacks the capability gets "permission denied".
"""

from django.db.models import Q, QuerySet
from django.http import Http404
from rest_framework.exceptions import PermissionDenied

from annotation.models import Episode, Membership, Project, Task
from backend.accounts.models import User
from backend.accounts.roles import ROLE_CAPABILITIES, Capability, Role


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


def require(user: User, project: Project, capability: Capability) -> None:
    """Raise 404 for non-members and 403 for members whose role lacks ``capability``."""
    if user.is_superuser:
        return
    role = role_in(user, project)
    if role is None:
        raise Http404("No such project.")
    if capability not in ROLE_CAPABILITIES[Role(role)]:
        raise PermissionDenied(f"A project {role} may not do this ({capability.value}).")


def visible_tasks(user: User) -> QuerySet[Task]:
    """All tasks of projects the user oversees, plus the tasks they hold or are assigned."""
    if user.is_superuser:
        return Task.objects.all()
    overseen = Q(project__in=projects_where(user, Capability.VIEW_EPISODES)) | Q(
        project__in=projects_where(user, Capability.MANAGE_TASKS)
    )
    own = Q(project__in=projects_where(user, Capability.WORK_QUEUE), assignee=user)
    return Task.objects.filter(overseen | own)


def visible_episodes(user: User) -> QuerySet[Episode]:
    """Episodes of projects the user may view, plus their own; never another annotator's."""
    if user.is_superuser:
        return Episode.objects.all()
    viewable = projects_where(user, Capability.VIEW_EPISODES)
    return Episode.objects.filter(Q(task__project__in=viewable) | Q(annotator=user))
