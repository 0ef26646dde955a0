"""API representations of users and access tokens."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.accounts.models import AccessToken, User
from backend.accounts.tokens import SCOPES


class AccessTokenSerializer(serializers.ModelSerializer):
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=SCOPES), min_length=1)
    days = serializers.IntegerField(write_only=True, min_value=1, default=90)
    is_active = serializers.BooleanField(read_only=True)
    prefix = serializers.SerializerMethodField()

    class Meta:
        model = AccessToken
        fields = [
            "id",
            "name",
            "prefix",
            "scopes",
            "days",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "is_active",
        ]
        read_only_fields = ["created_at", "expires_at", "revoked_at", "last_used_at"]

    def get_prefix(self, token: AccessToken) -> str:
        return f"tdm_{token.prefix}"


class NewAccessTokenSerializer(AccessTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(AccessTokenSerializer.Meta):
        fields = [*AccessTokenSerializer.Meta.fields, "token"]


class MembershipSummarySerializer(serializers.Serializer):
    project = serializers.IntegerField()
    project_name = serializers.CharField()
    role = serializers.CharField()


class MeSerializer(serializers.ModelSerializer):
    memberships = serializers.SerializerMethodField()

    class Meta:
        model = User
        fields = [
            "id",
            "username",
            "first_name",
            "last_name",
            "email",
            "is_superuser",
            "can_create_projects",
            "memberships",
        ]

    @extend_schema_field(MembershipSummarySerializer(many=True))
    def get_memberships(self, user: User) -> list[dict[str, object]]:
        return [
            {"project": m.project_id, "project_name": m.project.name, "role": m.role}
            for m in user.memberships.select_related("project")
        ]
