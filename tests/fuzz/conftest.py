"""What the fuzzers share: a fixed seed and a bounded budget in `make test`, scaled up by
`make fuzz` (PARLEY_FUZZ_SCALE=20) to run the same fuzzers longer."""

import os

import pytest
from hypothesis import HealthCheck, settings

SCALE = max(1, int(os.environ.get("PARLEY_FUZZ_SCALE", "1")))
# The seed every fuzzer starts from (`make fuzz` may set another to explore further).
SEED = int(os.environ.get("PARLEY_FUZZ_SEED", "20261124"))


def budget(examples: int) -> settings:
    """Hypothesis settings for a fuzzer of ``examples`` cases (times the scale), derandomized
    by the fixed seed, with no deadline: these cases cross real sockets on a shared machine."""
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        database=None,
        derandomize=os.environ.get("PARLEY_FUZZ_SEED") is None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(items):
    """Every fuzzer runs once, in the PostgreSQL pass: PostgreSQL refuses more than SQLite does
    (a NUL in text), so what passes there passes on both."""
    for item in items:
        if "tests/fuzz/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.postgresql)
