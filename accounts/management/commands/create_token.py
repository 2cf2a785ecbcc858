"""``manage.py create_token <username>``: make an API token for a person and print its key, the
only time it is shown (people make their own at /settings/tokens/ or /api/me/tokens/)."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import token_create, token_revoke
from core.errors import ApplicationError


class Command(BaseCommand):
    help = "Make an API token for a person and print its key (shown this once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="API token", help="what the token is for")
        parser.add_argument(
            "--expires-in-days", type=int, default=None, help="it stops working after so many"
        )
        parser.add_argument(
            "--replace",
            action="store_true",
            help="revoke the person's other tokens of that name first (one stays)",
        )

    def handle(self, *args, username, name, expires_in_days, replace, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No one is called {username!r}.")
        if expires_in_days is not None and expires_in_days < 1:
            raise CommandError("--expires-in-days: 1 or more.")
        expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
        with transaction.atomic():
            if replace:
                for earlier in ApiToken.objects.filter(
                    user=user, name=name, revoked_at__isnull=True
                ):
                    token_revoke(token=earlier)
            try:
                _, key = token_create(user=user, name=name, expires_at=expires_at)
            except ApplicationError as error:
                raise CommandError(error.message) from None
        self.stdout.write(key)
