"""A workspace's members page and audit page, for its owners (403 for its other members, 404 for
strangers). Plain forms posted to the page: change a role, remove someone, transfer ownership,
invite by email, revoke an invitation. It all works without JavaScript."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render

from conversations.models import Membership
from core.decoding import check_text
from core.errors import ApplicationError
from reach.access import page_refusal, workspace_owner_access

from .audit_log import workspace_audit
from .invitations import invitation_revoke, invitation_send
from .members import (
    member_remove,
    member_role_change,
    members,
    ownership_transfer,
)
from .models import Invitation

AUDIT_PAGE = 50


def _owned(request, slug: str, doing: str):
    try:
        return workspace_owner_access(user=request.user, slug=slug, doing=doing)
    except ApplicationError as error:
        raise page_refusal(error) from None


@login_required
def members_page(request, slug):
    workspace = _owned(request, slug, "manage its members")
    context = {"form": {"email": "", "role": "member"}}
    status = 200
    if request.method == "POST":
        try:
            for value in request.POST.values():
                check_text(value, what="The form")
            done = _act(request, workspace)
        except ApplicationError as error:
            context["error"] = {"action": request.POST.get("action", ""), "message": error.message}
            context["form"] = {
                "email": request.POST.get("email", ""),
                "role": request.POST.get("role", "member"),
            }
            status = 409 if error.status == 409 else 400
        else:
            messages.success(request, done)
            if request.POST.get("action") == "transfer":
                return redirect("home")  # no longer an owner: this page is not theirs
            return redirect("workspace-members", slug=workspace.slug)
    pending = list(
        Invitation.objects.filter(workspace=workspace).pending().select_related("invited_by")
    )
    context.update(
        {
            "workspace": workspace,
            "members": members(workspace=workspace),
            "roles": Membership.Role.choices,
            "pending": pending,
        }
    )
    return render(request, "accounts/members.html", context, status=status)


def _act(request, workspace) -> str:
    action = request.POST.get("action", "")
    username = request.POST.get("username", "")
    if action == "role":
        role = request.POST.get("role", "")
        member_role_change(
            workspace=workspace, username=username, role=role, actor=request.user, request=request
        )
        return f"{username} is now {dict(Membership.Role.choices).get(role, role).lower()}."
    if action == "remove":
        member_remove(workspace=workspace, username=username, actor=request.user, request=request)
        return f"{username} was removed from {workspace.name}."
    if action == "transfer":
        ownership_transfer(
            workspace=workspace, username=username, actor=request.user, request=request
        )
        return f"{username} now owns {workspace.name}; you are a member."
    if action == "invite":
        invitation = invitation_send(
            workspace=workspace,
            email=request.POST.get("email", ""),
            role=request.POST.get("role", ""),
            invited_by=request.user,
            request=request,
        )
        return f"Invitation sent to {invitation.email}."
    if action == "revoke":
        invitation = Invitation.objects.filter(
            pk=request.POST.get("invitation", ""), workspace=workspace
        ).first()
        if invitation is None:
            raise ApplicationError("not_found", "Invitation was not found.", status=404)
        invitation_revoke(invitation=invitation, actor=request.user, request=request)
        return f"Invitation to {invitation.email} revoked."
    raise ApplicationError("invalid", "The form asked for nothing this page does.")


@login_required
def audit_page(request, slug):
    workspace = _owned(request, slug, "read its audit log")
    paginator = Paginator(workspace_audit(workspace=workspace), AUDIT_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    return render(request, "accounts/audit.html", {"workspace": workspace, "page": page})
