"""Create the demo workspace (alice = owner, bob = member, carol = viewer) and its sample files.

Safe to run again: what exists is left as it is, passwords included. Each person gets a fresh
"Demo token" every run, printed (a key is kept only as its hash, so it cannot be shown again):
the one printed before is revoked, and a person keeps one demo token.
"""

import io
import shutil
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from conversations import services
from conversations.models import Conversation, Membership, Workspace

DEMO_FILES = Path(__file__).resolve().parents[2] / "demo_files"
PEOPLE = [
    ("alice", "Alice", "Anders", Membership.Role.OWNER),
    ("bob", "Bob", "Brandt", Membership.Role.MEMBER),
    ("carol", "Carol", "Chen", Membership.Role.VIEWER),
]


class Command(BaseCommand):
    help = "Create the demo workspace, its people and sample files (idempotent)."

    def handle(self, *args, **options):
        User = get_user_model()
        credentials = []
        with transaction.atomic():
            workspace, _ = Workspace.objects.get_or_create(
                slug="demo", defaults={"name": "Demo team"}
            )
            for username, first, last, role in PEOPLE:
                password = f"{username}-parley"
                user, created = User.objects.get_or_create(
                    username=username,
                    defaults={
                        "first_name": first,
                        "last_name": last,
                        "email": f"{username}@example.com",
                    },
                )
                if created:
                    user.set_password(password)
                    # Alice, the owner, also oversees everything in the Django admin.
                    user.is_staff = user.is_superuser = username == "alice"
                    user.save()
                if not Membership.objects.filter(workspace=workspace, user=user).exists():
                    services.membership_set(workspace=workspace, user=user, role=role)
                # The accounts app's command (this app does not import accounts).
                made = io.StringIO()
                call_command("create_token", username, name="Demo token", replace=True, stdout=made)
                key = made.getvalue().strip()
                credentials.append((username, role, password if created else None, key))
            if not Conversation.objects.filter(workspace=workspace).exists():
                services.conversation_create(
                    workspace=workspace,
                    user=User.objects.get(username="alice"),
                    title="Getting started",
                )
        root = workspace.files_root
        copied = 0
        for source in DEMO_FILES.rglob("*"):
            target = root / source.relative_to(DEMO_FILES)
            if source.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            elif not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                copied += 1
        self.stdout.write(f"Demo workspace 'demo' ({workspace.name}); files in {root}")
        if copied:
            self.stdout.write(f"  copied {copied} sample files")
        for username, role, password, key in credentials:
            shown = password or f"{username}-parley (unless changed)"
            self.stdout.write(f"  {username:<6} {role:<7} password: {shown:<34} token: {key}")
