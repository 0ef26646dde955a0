"""Who may do what: the role table of the design (§8), in one place.

A user's role lives on their membership of a project; platform admins (``is_superuser``) may
do everything everywhere. Capabilities, not role names, are what views check, so that the
table below is the only place that knows which role may do what.
"""

from enum import StrEnum


class Role(StrEnum):
    ANNOTATOR = "annotator"
    REVIEWER = "reviewer"
    MANAGER = "manager"
    ENGINEER = "engineer"


class Capability(StrEnum):
    WORK_QUEUE = "work_queue"  # claim tasks, hold a lease, work own episodes
    VIEW_EPISODES = "view_episodes"  # read any episode of the project, watch streams view-only
    MANAGE_TASKS = "manage_tasks"  # edit the project, members, import and assign tasks
    REVIEW = "review"  # give a verdict on an episode
    READ_DATASETS = "read_datasets"  # list and download dataset exports
    MANAGE_DATASETS = "manage_datasets"  # create dataset exports and fine-tuning jobs
    RUN_ROLLOUTS = "run_rollouts"  # start, pause and cancel autonomous rollout batches


ROLE_CAPABILITIES: dict[Role, frozenset[Capability]] = {
    Role.ANNOTATOR: frozenset({Capability.WORK_QUEUE}),
    Role.REVIEWER: frozenset({Capability.VIEW_EPISODES, Capability.REVIEW}),
    Role.MANAGER: frozenset(
        {
            Capability.VIEW_EPISODES,
            Capability.MANAGE_TASKS,
            Capability.REVIEW,
            Capability.READ_DATASETS,
            Capability.RUN_ROLLOUTS,
        }
    ),
    Role.ENGINEER: frozenset(
        {Capability.READ_DATASETS, Capability.MANAGE_DATASETS, Capability.RUN_ROLLOUTS}
    ),
}


def role_allows(role: str | None, capability: Capability) -> bool:
    if role is None:
        return False
    return capability in ROLE_CAPABILITIES.get(Role(role), frozenset())
