# Conversations get archived (archived_at) and are listed by their latest activity
# (last_activity_at, kept by append_events). Existing rows take their newest event's time, or
# their creation when they have none.

import django.utils.timezone
from django.db import migrations, models
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce


def fill_last_activity(apps, schema_editor):
    Conversation = apps.get_model("conversations", "Conversation")
    TurnEvent = apps.get_model("conversations", "TurnEvent")
    # The event with the highest seq is the newest: stamps rise with seq (see append_events),
    # and (conversation, seq) is indexed.
    newest = (
        TurnEvent.objects.filter(conversation=OuterRef("pk"))
        .order_by("-seq")
        .values("created_at")[:1]
    )
    Conversation.objects.update(last_activity_at=Coalesce(Subquery(newest), "created_at"))


class Migration(migrations.Migration):

    dependencies = [
        ("conversations", "0007_turn_agent"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="archived_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="conversation",
            name="last_activity_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
        migrations.RunPython(fill_last_activity, migrations.RunPython.noop, elidable=True),
    ]
