from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.http import HttpRequest

from backend.accounts.models import AccessToken, User


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    fieldsets = (
        *(DjangoUserAdmin.fieldsets or ()),
        ("Tandem", {"fields": ("can_create_projects",)}),
    )
    list_display = (
        "username",
        "email",
        "first_name",
        "last_name",
        "can_create_projects",
        "is_staff",
    )
    list_filter = (*DjangoUserAdmin.list_filter, "can_create_projects")


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    """Tokens are shown, searched and revoked here; their secrets never are (only hashes exist)."""

    list_display = ("name", "user", "prefix", "scopes", "expires_at", "revoked_at", "last_used_at")
    list_filter = ("revoked_at", "expires_at")
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = ("user", "prefix", "scopes", "created_at", "expires_at", "last_used_at")
    exclude = ("secret_hash",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
