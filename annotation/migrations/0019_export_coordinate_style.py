from django.db import migrations, models


def style_written(apps, schema_editor):
    """Exports made before this field wrote their rows in the project's own ``style`` setting
    (``uitars15`` where it had none): record that, so that training reads them as written."""
    DatasetExport = apps.get_model("annotation", "DatasetExport")
    for export in DatasetExport.objects.select_related("project").iterator():
        style = (export.project.model_settings or {}).get("style", "uitars15")
        if style != "uitars15":
            export.coordinate_style = style
            export.save(update_fields=["coordinate_style"])


class Migration(migrations.Migration):
    dependencies = [("annotation", "0018_evaluator_checks")]

    operations = [
        migrations.AddField(
            model_name="datasetexport",
            name="coordinate_style",
            field=models.CharField(
                default="uitars15",
                help_text=(
                    "How the rows write coordinates: the convention of the model the project "
                    "served when the export was asked for (its version A's, else its own "
                    "settings')."
                ),
                max_length=16,
            ),
        ),
        migrations.RunPython(style_written, migrations.RunPython.noop),
    ]
