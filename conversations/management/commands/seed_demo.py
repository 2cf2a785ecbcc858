"""Create the demo workspace (alice = owner, bob = member, carol = viewer), its sample files and
its first conversations (see conversations.management.demo).

Safe to run again: what exists is left as it is, passwords included; the files and the
conversations are seeded once, so what people changed since is kept. Each person gets a fresh
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
from conversations.management.demo import demo_conversations_seed
from conversations.models import Membership, Workspace

DEMO_FILES = Path(__file__).resolve().parents[2] / "demo_files"
# Left in the workspace's files root once its files were seeded (hidden: no agent sees it).
SEEDED_MARKER = ".parley-demo-seeded"
PEOPLE = [
    ("alice", "Alice", "Anders", Membership.Role.OWNER),
    ("bob", "Bob", "Brandt", Membership.Role.MEMBER),
    ("carol", "Carol", "Chen", Membership.Role.VIEWER),
]
USERNAMES = [username for username, *_ in PEOPLE]


def seed_files(root: Path) -> int:
    """Copy the demo's files into ``root`` the first time only (what people renamed, moved or
    deleted since stays so): into an empty folder, then marked as seeded. How many were copied."""
    marker = root / SEEDED_MARKER
    if marker.exists():
        return 0
    root.mkdir(parents=True, exist_ok=True)
    copied = 0
    # A folder seeded before the marker existed (or people's own) is left as it is.
    if not any(root.iterdir()):
        for source in sorted(DEMO_FILES.rglob("*")):
            target = root / source.relative_to(DEMO_FILES)
            if source.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                copied += 1
    marker.write_text("The demo's files were copied here once; seed_demo copies them no more.\n")
    return copied


class Command(BaseCommand):
    help = "Create the demo workspace, its people and sample files (idempotent)."

    def handle(self, *args, **options):
        User = get_user_model()
        credentials = []
        with transaction.atomic():
            workspace, new = Workspace.objects.get_or_create(
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
        root = workspace.files_root
        copied = seed_files(root)
        users = {user.username: user for user in User.objects.filter(username__in=USERNAMES)}
        # The demo's conversations come with its workspace, once: those deleted stay so.
        seeded = demo_conversations_seed(workspace=workspace, users=users) if new else []
        self.stdout.write(f"Demo workspace 'demo' ({workspace.name}); files in {root}")
        if copied:
            self.stdout.write(f"  copied {copied} sample files")
        for title in seeded:
            self.stdout.write(f"  seeded the conversation “{title}”")
        for username, role, password, key in credentials:
            shown = password or f"{username}-parley (unless changed)"
            self.stdout.write(f"  {username:<6} {role:<7} password: {shown:<34} token: {key}")
