from django.apps import AppConfig


class VmPoolConfig(AppConfig):
    name = "vm_pool"
    verbose_name = "Desktops and screenshots"
