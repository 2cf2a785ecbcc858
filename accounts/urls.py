"""Routes of the accounts app, mounted at the root: its pages and its REST API under /api/."""

from django.urls import path

from . import account_page, password_pages

urlpatterns = [
    # A person's own account (accounts.account_page, accounts.password_pages).
    path("settings/account/", account_page.account_settings, name="account-settings"),
    path(
        "settings/account/email/confirm/",
        account_page.email_confirm,
        name="email-change-confirm",
    ),
    path(
        "settings/account/password/",
        password_pages.PasswordChangeView.as_view(),
        name="password-change",
    ),
    path("password-reset/", password_pages.PasswordResetView.as_view(), name="password-reset"),
    path(
        "password-reset/sent/",
        password_pages.PasswordResetDoneView.as_view(),
        name="password-reset-sent",
    ),
    path("reset/", password_pages.password_reset_link, name="password-reset-link"),
    path(
        "reset/done/",
        password_pages.PasswordResetCompleteView.as_view(),
        name="password-reset-complete",
    ),
    path(
        "reset/<uidb64>/<token>/",
        password_pages.PasswordResetConfirmView.as_view(),
        name="password-reset-confirm",
    ),
]
