"""The README's production recipe shows the files the cluster tests run: every line of every
block it shows under a file's name is a line of that file (comments and blank lines aside)."""

import re

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.once


def _blocks(section: str):
    """Each fenced block with the file the text just before it names last (``ops/deploy/...``)."""
    parts = re.split(r"^```[a-z]*\n(.*?)^```$", section, flags=re.S | re.M)
    for before, block in zip(parts[0::2], parts[1::2], strict=False):
        named = re.findall(r"`(ops/deploy/[^`]+)`", before)
        yield (named[-1] if named else None), block


def test_every_block_of_the_production_recipe_is_lines_of_a_file_the_tests_run():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### The production recipe", 1)[1].split("**Other load balancers.**")[0]
    checked = set()
    for name, block in _blocks(section):
        if name is None:
            continue
        lines = {line.rstrip() for line in (ROOT / name).read_text().splitlines()}
        shown = [line.rstrip() for line in block.splitlines() if line.strip()]
        assert shown and [line for line in shown if line not in lines] == [], name
        checked.add(name)
    assert checked == {
        "ops/deploy/parley@.service",
        "ops/deploy/parley.env",
        "ops/deploy/haproxy.env",
        "ops/deploy/haproxy.cfg",
    }
