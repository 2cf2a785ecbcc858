"""Fixtures of the tests of the agent backed by a model: a local server speaking the OpenAI
protocol (tests/llm_server.py), and Parley started pointing at it."""

import pytest

from tests import llm_server as llm

KEY = "sk-test-secret"


@pytest.fixture
def model():
    with llm.ModelServer(api_key=KEY, models=("gpt-test", "gpt-other")) as server:
        yield server


@pytest.fixture
def start_parley(make_server, model):
    def start(**env):
        settings = {
            "PARLEY_LLM_BASE_URL": model.base_url,
            "PARLEY_LLM_API_KEY": KEY,
            "PARLEY_LLM_MODEL": "gpt-test",
            **env,
        }
        return make_server(**settings)

    return start
