"""The accounts app: who people are and how they get in. Single sign-on (OpenID Connect), API
tokens, invitations, the account and members pages, and the audit log of access."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and access"

    def ready(self):
        from . import audit, tokens

        audit.connect_signals()
        tokens.connect()
