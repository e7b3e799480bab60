from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from partners.models import Partner, PortalAccount
from partners.services import partner_create, partner_move


class ChildInline(admin.TabularInline):
    model = Partner
    fk_name = "parent"
    fields = ["code", "name", "level", "is_active"]
    readonly_fields = ["code", "name", "level", "is_active"]
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Partner)
class PartnerAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "parent_link", "level", "children_count", "is_active", "stats_link"]
    list_filter = ["level", "is_active"]
    search_fields = ["code", "name"]
    readonly_fields = ["level", "path", "created_at", "updated_at"]
    autocomplete_fields = ["parent"]
    inlines = [ChildInline]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("parent").annotate(_children=Count("children"))

    @admin.display(description=_("children"), ordering="_children")
    def children_count(self, obj: Partner) -> int:
        return obj._children

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

    def change_view(self, request, object_id, form_url="", extra_context=None):
        partner = self.get_object(request, object_id)
        if partner is not None:
            extra_context = {
                **(extra_context or {}),
                "network_url": reverse("admin:network", args=[partner.code]),
            }
        return super().change_view(request, object_id, form_url, extra_context=extra_context)

    def save_model(self, request, obj: Partner, form, change: bool) -> None:
        # Level and path of the whole subtree depend on the parent: the services keep them right.
        if not change:
            created = partner_create(code=obj.code, name=obj.name, parent=obj.parent, is_active=obj.is_active)
            obj.pk, obj.path, obj.level = created.pk, created.path, created.level
            return
        parent_changed = "parent" in form.changed_data
        obj.save(update_fields=["code", "name", "is_active", "updated_at"])
        if parent_changed:
            partner_move(partner=obj, new_parent=obj.parent)


@admin.register(PortalAccount)
class PortalAccountAdmin(admin.ModelAdmin):
    list_display = ["user", "partner", "created_at"]
    search_fields = ["partner__code", "user__username"]
    autocomplete_fields = ["partner"]
