"""The external app: agents that run elsewhere (Claude Code, Codex CLI, a script) asking the team
through Parley's MCP endpoint."""

from django.apps import AppConfig


class ExternalConfig(AppConfig):
    name = "external"
    verbose_name = "Outside agents"
