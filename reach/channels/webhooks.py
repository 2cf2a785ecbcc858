"""PLACEHOLDER (being built): the webhooks channel."""

from .base import Result, Skip


class WebhookChannel:
    def prepare(self, delivery):
        return Skip("Not built yet.")

    def send(self, outgoing) -> Result:
        raise NotImplementedError

    def remember(self, delivery, result) -> None:
        pass
