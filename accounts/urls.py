"""Routes of the accounts app, mounted at the root: its pages and its REST API under /api/."""

from django.urls import path

from . import (
    account_page,
    apis,
    invitation_pages,
    member_pages,
    password_pages,
    sso_pages,
    token_pages,
    tokens_api,
)

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
    # Members, invitations and the audit log (accounts.members, .invitations, .audit_log).
    path("workspaces/<slug:slug>/members/", member_pages.members_page, name="workspace-members"),
    path("workspaces/<slug:slug>/audit/", member_pages.audit_page, name="workspace-audit"),
    path("invitations/open/", invitation_pages.invitation_page, name="invitation"),
    path(
        "api/workspaces/<slug:slug>/invitations/",
        apis.InvitationListCreateApi.as_view(),
        name="api-invitations",
    ),
    path(
        "api/invitations/<str:invitation_id>/",
        apis.InvitationDetailApi.as_view(),
        name="api-invitation",
    ),
    path("api/workspaces/<slug:slug>/members/", apis.MemberListApi.as_view(), name="api-members"),
    path(
        "api/workspaces/<slug:slug>/members/<str:username>/",
        apis.MemberDetailApi.as_view(),
        name="api-member",
    ),
    path(
        "api/workspaces/<slug:slug>/transfer/",
        apis.OwnershipTransferApi.as_view(),
        name="api-ownership-transfer",
    ),
    path("api/workspaces/<slug:slug>/audit/", apis.AuditLogApi.as_view(), name="api-audit"),
    # Single sign-on (accounts.sso_pages): off to the identity provider, and back.
    path(
        "oidc/authenticate/",
        sso_pages.SsoStartView.as_view(),
        name="oidc_authentication_init",
    ),
    path(
        "oidc/callback/",
        sso_pages.SsoCallbackView.as_view(),
        name="oidc_authentication_callback",
    ),
    # API tokens: a person's own (accounts.tokens_api, accounts.token_pages).
    path("api/me/tokens/", tokens_api.MyTokensApi.as_view(), name="api-my-tokens"),
    path("api/me/tokens/<str:token_id>/", tokens_api.MyTokenApi.as_view(), name="api-my-token"),
    path("settings/tokens/", token_pages.tokens_page, name="api-tokens"),
    path(
        "settings/tokens/<str:token_id>/revoke/",
        token_pages.token_revoke_page,
        name="api-token-revoke",
    ),
]
