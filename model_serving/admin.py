"""The Django admin of fine-tuning jobs, model versions and evaluations: read-only records
(jobs and evaluations are made through the API, which checks what they may use)."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from model_serving.models import EvaluationRun, FineTuneJob, ModelVersion


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(FineTuneJob)
class FineTuneJobAdmin(ReadOnlyAdmin):
    list_display = ("id", "version_name", "status", "progress", "base_model", "created_at")
    list_filter = ("status",)
    search_fields = ("version_name", "name", "base_model")


@admin.register(ModelVersion)
class ModelVersionAdmin(ReadOnlyAdmin):
    list_display = ("name", "base_model", "serving_status", "parent", "job", "created_at")
    list_filter = ("serving_status",)
    search_fields = ("name", "base_model")


@admin.register(EvaluationRun)
class EvaluationRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "model_version", "project_id", "status", "success_rate", "total")
    list_filter = ("status",)
