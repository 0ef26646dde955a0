"""A decided step records when a job took it for execution (``executing_since``), and a proposal
can be marked superseded by a newer observation.

The append-only triggers let exactly those changes through: on a decided step only
``executing_since`` may change, and a proposal may only go from offered to superseded. Every
other update of a decided step or of a proposal is still refused by PostgreSQL.
"""

from django.db import migrations, models

FORWARD = """
CREATE FUNCTION tandem_step_frozen_once_decided() RETURNS trigger AS $$
DECLARE
  changed annotation_step;
BEGIN
  changed := NEW;
  changed.executing_since := OLD.executing_since;
  IF changed IS DISTINCT FROM OLD THEN
    RAISE EXCEPTION 'tandem: % rows are append-only (id %); write a revision instead',
      TG_TABLE_NAME, OLD.id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE FUNCTION tandem_proposal_only_superseded() RETURNS trigger AS $$
DECLARE
  changed annotation_proposal;
BEGIN
  changed := NEW;
  changed.superseded := OLD.superseded;
  IF changed IS DISTINCT FROM OLD OR (OLD.superseded AND NOT NEW.superseded) THEN
    RAISE EXCEPTION 'tandem: % rows are append-only (id %); write a revision instead',
      TG_TABLE_NAME, OLD.id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;

DROP TRIGGER annotation_step_frozen_once_decided ON annotation_step;
CREATE TRIGGER annotation_step_frozen_once_decided
  BEFORE UPDATE ON annotation_step
  FOR EACH ROW WHEN (OLD.decided_at IS NOT NULL)
  EXECUTE FUNCTION tandem_step_frozen_once_decided();

DROP TRIGGER annotation_proposal_append_only ON annotation_proposal;
CREATE TRIGGER annotation_proposal_append_only
  BEFORE UPDATE ON annotation_proposal
  FOR EACH ROW EXECUTE FUNCTION tandem_proposal_only_superseded();
"""

BACKWARD = """
DROP TRIGGER annotation_step_frozen_once_decided ON annotation_step;
CREATE TRIGGER annotation_step_frozen_once_decided
  BEFORE UPDATE ON annotation_step
  FOR EACH ROW WHEN (OLD.decided_at IS NOT NULL)
  EXECUTE FUNCTION tandem_refuse_update();

DROP TRIGGER annotation_proposal_append_only ON annotation_proposal;
CREATE TRIGGER annotation_proposal_append_only
  BEFORE UPDATE ON annotation_proposal
  FOR EACH ROW EXECUTE FUNCTION tandem_refuse_update();

DROP FUNCTION tandem_step_frozen_once_decided();
DROP FUNCTION tandem_proposal_only_superseded();
"""


class Migration(migrations.Migration):
    dependencies = [("annotation", "0008_step_reobservation")]

    operations = [
        migrations.AddField(
            model_name="step",
            name="executing_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
