"""PLACEHOLDER (being built): the slack channel."""

from .base import Result, Skip


class SlackChannel:
    def prepare(self, delivery):
        return Skip("Not built yet.")

    def send(self, outgoing) -> Result:
        raise NotImplementedError

    def remember(self, delivery, result) -> None:
        pass
