"""The platform as Django sees it: an app with no models, there to register its system checks."""

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Platform"

    def ready(self):
        from . import checks  # noqa: F401  (registers them)
