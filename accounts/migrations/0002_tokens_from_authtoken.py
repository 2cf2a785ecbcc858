"""Each person's single DRF token (``rest_framework.authtoken``, no longer installed) becomes one
of their named API tokens, "API token", kept as the hash of its key with its creation time: the
key goes on working. The old table, which kept keys in the clear, is then dropped, and its app's
migrations forgotten. Read with SQL, where the table exists (a database made before this change);
a new database has none, and nothing is done."""

import hashlib
import secrets
from datetime import UTC

from django.db import migrations
from django.utils.dateparse import parse_datetime

OLD_TABLE = "authtoken_token"


def _when(value):
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)  # stored in UTC (USE_TZ)
    return value


def move_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('key')}, {quote('created')}, {quote('user_id')} "
            f"FROM {quote(OLD_TABLE)}"
        )
        rows = cursor.fetchall()
    for key, created, user_id in rows:
        key_hash = hashlib.sha256(key.encode()).hexdigest()
        if ApiToken.objects.filter(key_hash=key_hash).exists():
            continue
        ApiToken.objects.create(
            id="tok_" + secrets.token_hex(8),
            user_id=user_id,
            name="API token",
            key_hash=key_hash,
            key_start=key[:12],
            created_at=_when(created),
        )
    schema_editor.execute(f"DROP TABLE {quote(OLD_TABLE)}")
    schema_editor.execute(
        f"DELETE FROM {quote('django_migrations')} WHERE {quote('app')} = %s", ["authtoken"]
    )


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [
        # Not reversible in substance: the old table is gone, and the keys were never kept.
        migrations.RunPython(move_tokens, migrations.RunPython.noop),
    ]
