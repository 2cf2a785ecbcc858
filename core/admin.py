"""The admin's view of the login locks: axes' access attempts, each with the failures that count
now toward the two locks it is part of (its account from its address, and its address) and
whether either holds; a filter for the attempts whose lock holds. Deleting attempts lifts the
locks they set (an address's lock: every attempt from that address)."""

from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin
from django.db.models import IntegerField, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone


def _recent_failures(*same: str) -> Coalesce:
    """The failures within the cool-off of the attempts whose ``same`` fields are this one's
    (a NULL username, a token's, matches none)."""
    recent = AccessAttempt.objects.filter(
        attempt_time__gte=timezone.now() - settings.AXES_COOLOFF_TIME,
        **{field: OuterRef(field) for field in same},
    )
    total = recent.order_by().values(*same).annotate(n=Sum("failures_since_start")).values("n")
    return Coalesce(Subquery(total[:1]), 0, output_field=IntegerField())


def _locked() -> Q:
    return Q(account_failures__gte=settings.AXES_FAILURE_LIMIT) | Q(
        address_failures__gte=settings.PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT
    )


class LockFilter(admin.SimpleListFilter):
    title = "lock holds"
    parameter_name = "locked"

    def lookups(self, request, model_admin):
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(_locked())
        if self.value() == "no":
            return queryset.exclude(_locked())
        return queryset


class LockedAccessAttemptAdmin(AccessAttemptAdmin):
    list_display = [
        "attempt_time",
        "username",
        "ip_address",
        "user_agent",
        "path_info",
        "failures_since_start",
        "counted",
        "lock",
    ]
    list_filter = [LockFilter, "attempt_time", "path_info"]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                account_failures=_recent_failures("username", "ip_address"),
                address_failures=_recent_failures("ip_address"),
            )
        )

    @admin.display(description="failures counted now")
    def counted(self, attempt) -> str:
        limit = settings.PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT
        address = f"address {attempt.address_failures} of {limit}"
        if attempt.username is None:
            return address
        return f"account {attempt.account_failures} of {settings.AXES_FAILURE_LIMIT}, {address}"

    @admin.display(description="lock")
    def lock(self, attempt) -> str:
        held = []
        if attempt.account_failures >= settings.AXES_FAILURE_LIMIT:
            held.append("account from this address")
        if attempt.address_failures >= settings.PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT:
            held.append("address")
        return " and ".join(held) or "none"


admin.site.unregister(AccessAttempt)
admin.site.register(AccessAttempt, LockedAccessAttemptAdmin)
