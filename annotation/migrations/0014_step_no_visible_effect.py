"""A step records that its action had no visible effect (``Step.no_visible_effect``).

The flag is a fact about the step's execution, learnt once the screen after it is observed,
when the step is decided already: the append-only trigger lets it go from false to true, and
nothing else of a decided step but ``executing_since`` change.
"""

from django.db import migrations, models

FORWARD = """
CREATE OR REPLACE FUNCTION tandem_step_frozen_once_decided() RETURNS trigger AS $$
DECLARE
  changed annotation_step;
BEGIN
  changed := NEW;
  changed.executing_since := OLD.executing_since;
  changed.no_visible_effect := OLD.no_visible_effect;
  IF changed IS DISTINCT FROM OLD OR (OLD.no_visible_effect AND NOT NEW.no_visible_effect) THEN
    RAISE EXCEPTION 'tandem: % rows are append-only (id %); write a revision instead',
      TG_TABLE_NAME, OLD.id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
"""

BACKWARD = """
CREATE OR REPLACE FUNCTION tandem_step_frozen_once_decided() RETURNS trigger AS $$
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
"""


class Migration(migrations.Migration):
    dependencies = [("annotation", "0013_evaluation_attempts")]

    operations = [
        migrations.AddField(
            model_name="step",
            name="no_visible_effect",
            field=models.BooleanField(default=False),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
