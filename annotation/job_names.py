"""The app's jobs by name, and the fixed queue of each that has one, declared once.

A lower floor starts a job that a higher one handles by its name, never by importing it
(``send_after_commit(PROPOSE_STEP, [step.pk], QUEUES[PROPOSE_STEP])``); ``annotation.jobs``
registers every job under the same name. A job that acts on a desktop runs on that desktop's
host queue (``vm_pool.models.host_queue``; a rollout, its host's ``rollout_queue``) and has no
fixed queue here. Celery's routes in the settings (used when a job is sent without a queue) are
checked against ``QUEUES`` by a test. Floor 0 of the app: it imports nothing.
"""

# On the desktop's host.
PREPARE_EPISODE = "annotation.jobs.prepare_episode"
EXECUTE_STEP = "annotation.jobs.execute_step"
EVALUATE_EPISODE = "annotation.jobs.evaluate_episode"
RUN_ROLLOUT = "annotation.jobs.run_rollout"
DEMONSTRATION_ENDED = "annotation.jobs.demonstration_ended"
CHECK_REPLAY = "annotation.jobs.check_replay"
CHECK_EVALUATOR = "annotation.jobs.check_evaluator"
# On a fixed queue.
PROPOSE_STEP = "annotation.jobs.propose_step"
RETURN_LAPSED_LEASES = "annotation.jobs.return_lapsed_leases"
DISPATCH_ROLLOUTS = "annotation.jobs.dispatch_rollouts"
VALIDATE_ROLLOUT = "annotation.jobs.validate_rollout"
BUILD_EXPORT = "annotation.jobs.build_export"  # its queue: settings.TANDEM_EXPORT_QUEUE
EVALUATE_MODEL_VERSION = "annotation.jobs.evaluate_model_version"
DRAFT_THOUGHTS = "annotation.jobs.draft_thoughts"
CHECK_QUALITY = "annotation.jobs.check_quality"

QUEUES = {
    PROPOSE_STEP: "model",  # the model's calls: never behind desktops' or batch work
    DRAFT_THOUGHTS: "model",
    RETURN_LAPSED_LEASES: "default",
    DISPATCH_ROLLOUTS: "default",
    VALIDATE_ROLLOUT: "default",
    CHECK_QUALITY: "default",
    BUILD_EXPORT: "exports",  # batch work over recorded steps
    EVALUATE_MODEL_VERSION: "exports",  # batch work over recorded steps, like exports
}
