from django.db.models import QuerySet
from rest_framework import mixins, viewsets
from rest_framework.exceptions import PermissionDenied, ValidationError

from partners.models import Partner
from partners.permissions import get_visible_partner, visible_partners
from partners.serializers import PartnerSerializer


class PartnerViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """``/api/v1/partners/``: list (``?parent=CODE``, ``?level=N``), retrieve by code, create (staff)."""

    serializer_class = PartnerSerializer
    lookup_field = "code"
    lookup_value_regex = "[^/]+"

    def get_queryset(self) -> QuerySet[Partner]:
        qs = visible_partners(self.request.user).select_related("parent")
        params = self.request.query_params
        if "parent" in params:
            qs = qs.filter(parent__code=params["parent"]) if params["parent"] else qs.filter(parent=None)
        if "level" in params:
            if params["level"] not in {"1", "2", "3"}:
                raise ValidationError({"level": "level must be 1, 2 or 3."})
            qs = qs.filter(level=int(params["level"]))
        return qs.order_by("code")

    def get_object(self) -> Partner:
        return get_visible_partner(self.request.user, self.kwargs["code"])

    def perform_create(self, serializer: PartnerSerializer) -> None:
        if not self.request.user.is_staff:
            raise PermissionDenied("Only staff may create partners.")
        serializer.save()
