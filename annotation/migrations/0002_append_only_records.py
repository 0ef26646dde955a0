"""Steps, once decided, and proposals and revisions, always, cannot be updated in PostgreSQL.

The ORM never does it either; the trigger is the guarantee for every other path (a shell, a
bug, a future migration): a change to a decided step must be written as a StepRevision.
"""

from django.db import migrations

FORWARD = """
CREATE FUNCTION tandem_refuse_update() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION 'tandem: % rows are append-only (id %); write a revision instead',
    TG_TABLE_NAME, OLD.id USING ERRCODE = 'integrity_constraint_violation';
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER annotation_step_frozen_once_decided
  BEFORE UPDATE ON annotation_step
  FOR EACH ROW WHEN (OLD.decided_at IS NOT NULL)
  EXECUTE FUNCTION tandem_refuse_update();

CREATE TRIGGER annotation_proposal_append_only
  BEFORE UPDATE ON annotation_proposal
  FOR EACH ROW EXECUTE FUNCTION tandem_refuse_update();

CREATE TRIGGER annotation_steprevision_append_only
  BEFORE UPDATE ON annotation_steprevision
  FOR EACH ROW EXECUTE FUNCTION tandem_refuse_update();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS annotation_step_frozen_once_decided ON annotation_step;
DROP TRIGGER IF EXISTS annotation_proposal_append_only ON annotation_proposal;
DROP TRIGGER IF EXISTS annotation_steprevision_append_only ON annotation_steprevision;
DROP FUNCTION IF EXISTS tandem_refuse_update();
"""


class Migration(migrations.Migration):
    dependencies = [("annotation", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
