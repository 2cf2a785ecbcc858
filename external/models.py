"""What outlives an MCP session: the questions an outside agent asked as tasks."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from conversations.models import Turn


class ExternalTask(models.Model):
    """A question an outside agent asked as an MCP task (the 2025-11-25 protocol's
    task-augmented ``tools/call``): the agent gets its id at once and fetches the answer later,
    from any session and any process, also after Parley restarted.

    The question is stored under ``selection_id`` once asked. While the task is ``working``,
    what it comes to is read from that question; ``result`` holds the tool result once the
    turn's agent delivered it (with the steering that came with it).
    """

    class Status(models.TextChoices):
        WORKING = "working"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.CharField(primary_key=True, max_length=40)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    selection_id = models.CharField(max_length=24)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.WORKING)
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["user", "created_at"], name="external_task_user")]

    def __str__(self):
        return f"{self.id} ({self.status})"
