"""Settings for the tests: Parley's own, with a scratch folder shared with the servers tests start.

The test database is a file (not SQLite's in-memory one) so that a real Daphne started by a test
serves the same data the test set up.
"""

import os
import tempfile
from pathlib import Path

# Set before config.settings reads it, and inherited by every server a test starts; made (and
# removed at the end, see conftest) by the test run itself.
if "PARLEY_TEST_DIR" not in os.environ:
    os.environ["PARLEY_TEST_DIR"] = tempfile.mkdtemp(prefix="parley-test-")
    os.environ["PARLEY_TEST_DIR_MADE_BY"] = str(os.getpid())
SCRATCH = Path(os.environ["PARLEY_TEST_DIR"])
os.environ.setdefault("PARLEY_FILES_ROOT", str(SCRATCH / "files"))
os.environ.setdefault(
    "PARLEY_AGENTS",
    '{"flood": "conversations.agents.flood.FloodAgent", "broken": "tests.agents.BrokenAgent",'
    ' "broken-db": "tests.agents.DatabaseBrokenAgent",'
    ' "scripted": "tests.agents.ScriptedAgent"}',
)
os.environ.setdefault("PARLEY_BUILTIN_PACE_MS", "1")
# The servers tests start stop at once on SIGTERM (a test that drains asks for a grace).
os.environ.setdefault("PARLEY_SHUTDOWN_GRACE_SECONDS", "0")
# ...and say they are not ready at the first failed check (a test that tolerates asks for it).
os.environ.setdefault("PARLEY_READY_TOLERANCE_SECONDS", "0")
# A test may open many sockets and start many turns as one person: people's limits are far off,
# but for the tests of the limits themselves, which set their own.
for _name, _value in {
    "PARLEY_MAX_SOCKETS_PER_PERSON": "100000",
    "PARLEY_MAX_TAILS_PER_PERSON": "100000",
    "PARLEY_MAX_MCP_SESSIONS_PER_PERSON": "100000",
    "PARLEY_TURN_RATE": "100000/s",
    "PARLEY_CONVERSATION_RATE": "100000/s",
    "PARLEY_QUESTION_RATE": "100000/s",
    # The tests' webhook receivers listen on loopback (the tests of the rule set it off).
    "PARLEY_WEBHOOK_PRIVATE_ADDRESSES": "1",
}.items():
    os.environ.setdefault(_name, _value)

from config.settings import *  # noqa: E402, F403
from config.settings import DATABASES  # noqa: E402

TEST_DATABASE = SCRATCH / "db.sqlite3"
if DATABASES["default"]["ENGINE"] == "config.sqlite":
    DATABASES["default"]["TEST"] = {"NAME": str(TEST_DATABASE)}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
