from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("vm_pool", "0002_desktops"),
    ]

    operations = [
        migrations.RemoveField(model_name="desktop", name="vnc_password"),
        migrations.RemoveField(model_name="desktop", name="vnc_view_password"),
        migrations.AddField(
            model_name="desktop",
            name="vnc_socket",
            field=models.CharField(
                blank=True,
                help_text="The view-only VNC server's unix socket on the host (local desktops).",
                max_length=300,
            ),
        ),
        migrations.AddField(
            model_name="desktoptemplate",
            name="internet",
            field=models.BooleanField(
                default=False,
                help_text="Programs on these desktops may reach the internet (never the platform, "
                "the host or private networks); without it a desktop has no network at all.",
            ),
        ),
    ]
