"""The partner endpoints of /api/v1/: list, retrieve and create partners."""

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets

from cpsproject.common.params import error_responses, query
from partners.models import Partner
from partners.permissions import (
    PartnerReaders,
    PartnerWrites,
    get_visible_partner,
    visible_partners,
)
from partners.serializers import PartnerListQuery, PartnerSerializer


@extend_schema_view(
    list=extend_schema(
        summary="Partners visible to the caller",
        description="Staff see every partner; a portal token its partner's subtree. Ordered by code.",
        parameters=[PartnerListQuery],
        responses={200: PartnerSerializer(many=True), **error_responses(400, 404)},
    ),
    retrieve=extend_schema(
        summary="One partner",
        parameters=[OpenApiParameter("code", str, OpenApiParameter.PATH, description="The partner code.")],
        responses={200: PartnerSerializer, **error_responses(404)},
    ),
    create=extend_schema(
        summary="Create a partner (staff with partners.add_partner)",
        description="400 for a fourth level, a cycle, a duplicate code or a commission_bp outside 0-10000; 403 for "
        "a portal token, whatever it sends.",
        responses={201: PartnerSerializer, **error_responses(400)},
    ),
)
class PartnerViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """``/api/v1/partners/``: list (``?parent=CODE``, ``?level=N``), retrieve by code, create (staff).

    Creating needs ``partners.add_partner``, checked before the body is read: a portal token gets 403 whatever
    it sends, so it cannot probe which codes exist outside its subtree.
    """

    serializer_class = PartnerSerializer
    permission_classes = [PartnerReaders, PartnerWrites]
    lookup_field = "code"
    lookup_value_regex = "[^/]+"

    def get_queryset(self) -> QuerySet[Partner]:
        visible = visible_partners(self.request.user)
        qs = visible.select_related("parent")
        params = query(PartnerListQuery, self.request)
        if "parent" in params:
            parent = params["parent"]
            # The parent must be visible too: ?parent=<a code above the subtree> must not confirm it exists.
            qs = qs.filter(parent__code=parent, parent__in=visible) if parent else qs.filter(parent=None)
        if "level" in params:
            qs = qs.filter(level=params["level"])
        return qs.order_by("code")

    def get_object(self) -> Partner:
        return get_visible_partner(self.request.user, self.kwargs["code"])
