"""The activity app's configuration."""

from django.apps import AppConfig


class ActivityConfig(AppConfig):
    name = "activity"
    verbose_name = "Activity"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # A person's seen mark goes with its conversation: the admin deletes it with it, without
        # asking for the permission to delete seen marks (conversations never imports activity).
        from conversations import hooks

        from .models import Seen

        hooks.record_parts.add(Seen)
