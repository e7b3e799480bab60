from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from partners.models import Partner, PortalAccount
from partners.selectors import partner_subtree
from partners.services import partner_create, partner_deactivate, partner_move


class ChildInline(admin.TabularInline):
    model = Partner
    fk_name = "parent"
    fields = ["code", "name", "level", "is_active"]
    readonly_fields = ["code", "name", "level", "is_active"]
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Partner | None = None) -> bool:
        return False


@admin.register(Partner)
class PartnerAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "parent_link", "level", "children_count", "is_active", "stats_link"]
    list_filter = ["level", "is_active"]
    search_fields = ["code", "name"]
    readonly_fields = ["level", "path", "created_at", "updated_at"]
    autocomplete_fields = ["parent"]
    inlines = [ChildInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Partner]:
        return super().get_queryset(request).select_related("parent").annotate(_children=Count("children"))

    @admin.display(description=_("children"), ordering="_children")
    def children_count(self, obj: Partner) -> int:
        return obj._children  # type: ignore[attr-defined]  # annotated by get_queryset

    @admin.display(description=_("parent"), ordering="parent__code")
    def parent_link(self, obj: Partner) -> str:
        if obj.parent is None:
            return "—"
        url = reverse("admin:partners_partner_change", args=[obj.parent_id])
        return format_html('<a href="{}">{}</a>', url, obj.parent.code)

    @admin.display(description=_("statistics"))
    def stats_link(self, obj: Partner) -> str:
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:network", args=[obj.code]), _("partner page")
        )

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        partner = self.get_object(request, object_id)
        if partner is not None:
            extra_context = {
                **(extra_context or {}),
                "network_url": reverse("admin:network", args=[partner.code]),
            }
        return super().change_view(request, object_id, form_url, extra_context=extra_context)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # Deleting a partner would cascade to its statistics and its sub-partners: it is deactivated instead.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description=_("Deactivate the selected partners"), permissions=["change"])
    def deactivate_selected(self, request: HttpRequest, queryset: QuerySet[Partner]) -> None:
        count = sum(partner_deactivate(partner=partner) for partner in queryset)
        self.message_user(
            request,
            ngettext(
                "%(count)d partner deactivated: its new events become dead letters.",
                "%(count)d partners deactivated: their new events become dead letters.",
                count,
            )
            % {"count": count},
            messages.SUCCESS,
        )

    actions = ["deactivate_selected"]

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Explain that partners are deactivated, not deleted, and offer that instead; never delete."""
        partner = self.get_object(request, unquote(object_id))
        if partner is None:
            # Django's own answer to a missing object (not in its type stubs).
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_change_permission(request, partner):
            raise PermissionDenied
        if request.method == "POST":
            subtree = request.POST.get("subtree") == "1"
            count = partner_deactivate(partner=partner, include_subtree=subtree)
            self.message_user(
                request,
                ngettext(
                    "%(code)s deactivated (%(count)d partner): its statistics are kept, its new events become "
                    "dead letters.",
                    "%(code)s deactivated (%(count)d partners): their statistics are kept, their new events "
                    "become dead letters.",
                    count,
                )
                % {"code": partner.code, "count": count},
                messages.SUCCESS,
            )
            return HttpResponseRedirect(reverse("admin:partners_partner_change", args=[partner.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": _("Partners are deactivated, not deleted"),
            "opts": self.opts,
            "object": partner,
            "descendants": partner_subtree(partner=partner, include_self=False).count(),
            "stats_days": partner.daily_stats.count(),  # stats' DailyStat rows, without importing stats
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/partners/partner/deactivate.html", context)

    def save_model(
        self, request: HttpRequest, obj: Partner, form: "ModelForm[Partner]", change: bool
    ) -> None:
        # Level and path of the whole subtree depend on the parent: the services keep them right.
        if not change:
            created = partner_create(
                code=obj.code,
                name=obj.name,
                parent=obj.parent,
                is_active=obj.is_active,
                commission_bp=obj.commission_bp,
            )
            obj.pk, obj.path, obj.level = created.pk, created.path, created.level
            return
        parent_changed = "parent" in form.changed_data
        obj.save(update_fields=["code", "name", "is_active", "commission_bp", "updated_at"])
        if parent_changed:
            partner_move(partner=obj, new_parent=obj.parent)


@admin.register(PortalAccount)
class PortalAccountAdmin(admin.ModelAdmin):
    list_display = ["user", "partner", "created_at"]
    search_fields = ["partner__code", "partner__name", "user__username"]
    autocomplete_fields = ["partner"]
