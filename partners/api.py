from django.db.models import QuerySet
from rest_framework import mixins, viewsets
from rest_framework.exceptions import ValidationError

from cpsproject.common.params import choice_param
from partners.models import Partner
from partners.permissions import (
    IsStaffOrPortal,
    PartnerWrites,
    could_be_code,
    get_visible_partner,
    visible_partners,
)
from partners.serializers import PartnerSerializer


class PartnerViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """``/api/v1/partners/``: list (``?parent=CODE``, ``?level=N``), retrieve by code, create (staff).

    Creating needs ``partners.add_partner``, checked before the body is read: a portal token gets 403 whatever
    it sends, so it cannot probe which codes exist outside its subtree.
    """

    serializer_class = PartnerSerializer
    permission_classes = [IsStaffOrPortal, PartnerWrites]
    lookup_field = "code"
    lookup_value_regex = "[^/]+"

    def get_queryset(self) -> QuerySet[Partner]:
        qs = visible_partners(self.request.user).select_related("parent")
        params = self.request.query_params
        if "parent" in params:
            parent = params["parent"]
            if parent and not could_be_code(parent):
                raise ValidationError({"parent": "parent must be a partner code."})
            qs = qs.filter(parent__code=parent) if parent else qs.filter(parent=None)
        if params.get("level"):
            qs = qs.filter(level=int(choice_param(params, "level", choices=["1", "2", "3"])))
        return qs.order_by("code")

    def get_object(self) -> Partner:
        return get_visible_partner(self.request.user, self.kwargs["code"])
