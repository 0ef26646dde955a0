from django.apps import AppConfig


class ModelServingConfig(AppConfig):
    name = "model_serving"
    verbose_name = "Model serving"
