"""What an agent may ask, checked against the question kinds' one definition
(conversations.questions): defaults filled in, limits and unknown fields refused with a reason;
and the configured agents, resolved once, a wrong one named with its setting."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from conversations.agents import agents, load_agent
from conversations.questions import (
    MAX_LABEL_CHARS,
    MAX_OPTIONS,
    MAX_PROMPT_CHARS,
    clean_question,
)
from tests.conftest import LiveServer


@pytest.fixture
def root(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "q4.md").write_text("# Q4\n")
    return tmp_path


def test_an_options_value_defaults_to_its_label(root):
    fields = clean_question(
        kind="choice",
        prompt=" Which one? ",
        files_root=root,
        options=["Red", {"label": "Green"}, {"label": "Blue", "value": "b", "description": "sky"}],
    )
    assert fields == {
        "kind": "choice",
        "prompt": "Which one?",
        "options": [
            {"label": "Red", "value": "Red"},
            {"label": "Green", "value": "Green"},
            {"label": "Blue", "value": "b", "description": "sky"},
        ],
        "multiple": False,
        "allow_freeform": False,
    }


def test_defaults_come_from_the_definition(root):
    assert clean_question(kind="path", prompt="Which?", files_root=root) == {
        "kind": "path",
        "prompt": "Which?",
        "mode": "file",
        "root": "",
    }
    several = clean_question(
        kind="choice", prompt="Which?", files_root=root, options=["a", "b", "c"], multiple=True
    )
    assert (several["min_choices"], several["max_choices"]) == (1, 3)
    # A field of another kind is ignored, as MCP's one ask tool sends them.
    assert clean_question(kind="text", prompt="Name?", files_root=root, options=["x"]) == {
        "kind": "text",
        "prompt": "Name?",
    }


@pytest.mark.parametrize(
    "question, reason",
    [
        ({"kind": "poll"}, "Unknown question kind 'poll'"),
        ({"kind": "text", "colour": "red"}, "A question has no field 'colour'"),
        ({"kind": "text", "prompt": "  "}, "A question needs a prompt."),
        (
            {"kind": "text", "prompt": "x" * (MAX_PROMPT_CHARS + 1)},
            f"A question's prompt may be at most {MAX_PROMPT_CHARS} characters.",
        ),
        ({"kind": "choice", "options": []}, f"A choice needs 1 to {MAX_OPTIONS} options."),
        ({"kind": "choice"}, f"A choice needs 1 to {MAX_OPTIONS} options."),
        ({"kind": "choice", "options": [{"value": "v"}]}, "Each option needs a label"),
        ({"kind": "choice", "options": ["x" * (MAX_LABEL_CHARS + 1)]}, "is too long"),
        ({"kind": "choice", "options": ["a", {"label": "b", "value": "a"}]}, "values are unique"),
        (
            {"kind": "choice", "options": ["a", "b"], "multiple": True, "max_choices": 3},
            "min_choices and max_choices must fit the options.",
        ),
        ({"kind": "choice", "options": ["a"], "multiple": "yes"}, "multiple: 'yes' is not of"),
        ({"kind": "path", "mode": "link"}, "A path question's mode is one of"),
        ({"kind": "path", "root": "reports/q4.md"}, "is not a folder of the workspace"),
        ({"kind": "path", "root": "../outside"}, "The question's root is unsafe"),
        ({"kind": "form", "schema": {"type": "string"}}, "A form's schema is an object schema."),
        ({"kind": "text", "timeout": 0}, "timeout: 0 is less than or equal to the minimum of 0"),
        ({"kind": "text", "timeout": 10**9}, "timeout: 1000000000 is greater than the maximum"),
        ({"kind": "text", "escalate": "soon"}, "escalate: 'soon' is not of type 'boolean'"),
    ],
)
def test_a_malformed_question_is_refused_with_its_reason(root, question, reason):
    question = {"prompt": "Well?", **question}
    with pytest.raises(ValueError) as refused:
        clean_question(files_root=root, **question)
    assert reason in str(refused.value)


def test_every_configured_agent_is_resolved_once_and_a_wrong_one_is_named(settings, monkeypatch):
    imported = []

    def counting(path):
        imported.append(path)
        return import_string(path)

    monkeypatch.setattr("conversations.agents.import_string", counting)
    agents.load()
    configured = len(settings.PARLEY_AGENTS) + len(settings.PARLEY_TURN_AGENTS)
    assert len(imported) == configured
    for _ in range(3):
        assert type(load_agent("builtin")).__name__ == "BuiltinAgent"
        assert load_agent("external").resumable is True
    assert len(imported) == configured  # not imported again on use
    settings.PARLEY_AGENTS = {**settings.PARLEY_AGENTS, "mine": "nowhere.MineAgent"}
    with pytest.raises(ImproperlyConfigured) as wrong:
        agents.load()
    assert str(wrong.value).startswith("PARLEY_AGENTS['mine']: cannot import 'nowhere.MineAgent'")
    settings.PARLEY_AGENTS = {**settings.PARLEY_AGENTS, "mine": "conversations.questions.KINDS"}
    with pytest.raises(ImproperlyConfigured) as not_an_agent:
        agents.load()
    assert "PARLEY_AGENTS['mine']: 'conversations.questions.KINDS' is not an Agent" in str(
        not_an_agent.value
    )


@pytest.mark.django_db(transaction=True)
def test_a_server_whose_agent_cannot_be_imported_stops_at_its_start_naming_it(tmp_path):
    with pytest.raises(RuntimeError) as refused:
        LiveServer(tmp_path / "daphne.log", {"PARLEY_AGENTS": '{"mine": "nowhere.MineAgent"}'})
    assert "Daphne exited early" in str(refused.value)
    assert (
        "ImproperlyConfigured: PARLEY_AGENTS['mine']: cannot import 'nowhere.MineAgent': "
        "No module named 'nowhere'" in str(refused.value)
    )
