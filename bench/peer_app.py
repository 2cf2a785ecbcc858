"""The peer: django-eventstream serving the same stored events as Server-Sent Events, under
Daphne, with its database storage (SQLite in WAL mode, as Parley's default), for the replay
comparison of `make bench`.

    python -m daphne bench.peer_app:application      (PEER_DB names the database file)
    python -m bench.peer_app load EVENTS.jsonl        (creates the database and stores them)

Every event is stored in channel ``bench`` with its id, and read back from ``/events/bench/``
with ``Last-Event-ID: bench:<id>``, as django-eventstream's own clients resume.
"""

import json
import os
import sys

import django
from django.conf import settings
from django.urls import include, path

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-peer-app",
    ALLOWED_HOSTS=["*"],
    INSTALLED_APPS=[
        "django.contrib.contenttypes",
        "django.contrib.auth",
        "django_eventstream",
    ],
    MIDDLEWARE=[],
    ROOT_URLCONF=__name__,
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("PEER_DB", "peer.sqlite3"),
            "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"},
        }
    },
    EVENTSTREAM_STORAGE_CLASS="django_eventstream.storage.DjangoModelStorage",
    USE_TZ=True,
)
django.setup()

import django_eventstream  # noqa: E402

urlpatterns = [path("events/<channel>/", include(django_eventstream.urls))]
CHANNEL = "bench"


def load(path: str) -> int:
    """Store the events of a JSON-lines file (each a Parley event) in channel ``bench``, ids
    1, 2, …, as django-eventstream's storage would have (its own rows and counter)."""
    from django.core.management import call_command
    from django.db import transaction
    from django_eventstream.models import Event, EventCounter

    call_command("migrate", verbosity=0)
    with open(path) as lines:
        rows = [
            Event(channel=CHANNEL, type="message", eid=number, data=line.rstrip("\n"))
            for number, line in enumerate(lines, start=1)
        ]
    with transaction.atomic():
        Event.objects.bulk_create(rows, batch_size=2000)
        EventCounter.objects.update_or_create(name=CHANNEL, defaults={"value": len(rows)})
    return len(rows)


if __name__ == "__main__" and sys.argv[1:2] == ["load"]:
    print(json.dumps({"stored": load(sys.argv[2])}))
else:
    from django.core.asgi import get_asgi_application

    application = get_asgi_application()
