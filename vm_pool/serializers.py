"""API representations of desktops and their streams."""

from rest_framework import serializers

from vm_pool.models import Desktop, DesktopTemplate


class DesktopTemplateSerializer(serializers.ModelSerializer):
    class Meta:
        model = DesktopTemplate
        fields = ["name", "provider", "width", "height", "image", "internet"]
        read_only_fields = fields


class DesktopSerializer(serializers.ModelSerializer):
    template = serializers.CharField(source="template.name", read_only=True)
    leased_by = serializers.CharField(source="leased_by.username", read_only=True, default=None)

    class Meta:
        model = Desktop
        fields = [
            "id",
            "template",
            "host",
            "provider",
            "status",
            "generation",
            "width",
            "height",
            "leased_by",
            "lease_ref",
            "leased_at",
            "lease_expires_at",
            "broken_reason",
            "state_changed_at",
        ]
        read_only_fields = fields


class StreamRequestSerializer(serializers.Serializer):
    view_only = serializers.BooleanField(
        required=False,
        default=True,
        help_text="Streams are view-only; asking for control (false) is refused.",
    )


class StreamSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="The websockify address to open, token included.")
    token = serializers.CharField()
    view_only = serializers.BooleanField()
    expires_at = serializers.DateTimeField(help_text="No new connection after this moment.")
