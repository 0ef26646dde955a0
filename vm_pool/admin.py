from django.contrib import admin

from vm_pool.models import Screenshot


@admin.register(Screenshot)
class ScreenshotAdmin(admin.ModelAdmin):
    list_display = ("sha256", "width", "height", "size_bytes", "created_at")
    search_fields = ("sha256",)
    readonly_fields = ("sha256", "width", "height", "size_bytes", "file", "created_at")
