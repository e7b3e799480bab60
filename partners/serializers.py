from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.utils.translation import gettext, gettext_lazy
from rest_framework import serializers
from rest_framework.validators import UniqueValidator

from cpsproject.common.params import QueryChoice
from partners.models import CODE_VALIDATOR, Partner
from partners.permissions import could_be_code, portal_partner
from partners.services import partner_create

DUPLICATE_CODE = gettext_lazy("A partner with this code already exists.")


class PartnerSerializer(serializers.ModelSerializer):
    parent = serializers.SlugRelatedField(
        slug_field="code",
        queryset=Partner.objects.all(),
        allow_null=True,
        required=False,
        help_text="The parent's code; null for a top partner, and for the top of a portal token's subtree.",
        error_messages={"does_not_exist": gettext_lazy("No partner has the code '{value}'.")},
    )

    class Meta:
        model = Partner
        fields = ["code", "name", "parent", "level", "is_active", "commission_bp"]
        read_only_fields = ["level", "is_active"]
        # Django's own wording ("具有 代码 的 导流商 已存在") reads badly in Chinese.
        extra_kwargs = {
            "code": {
                "validators": [
                    CODE_VALIDATOR,
                    UniqueValidator(queryset=Partner.objects.all(), message=DUPLICATE_CODE),
                ]
            },
            "commission_bp": {
                "min_value": 0,
                "max_value": 10_000,
                "help_text": "The partner's own commission rate in basis points (0-10000); null: its level's "
                "default (CPS_COMMISSION_BP).",
            },
        }

    def to_representation(self, instance: Partner) -> dict:
        data = super().to_representation(instance)
        # A portal reads nothing outside its subtree, not even the code of its own partner's parent.
        request = self.context.get("request")
        scope = portal_partner(request.user) if request else None
        if scope is not None and instance.pk == scope.pk:
            data["parent"] = None
        return data

    def create(self, validated_data: dict) -> Partner:
        try:
            return partner_create(
                code=validated_data["code"],
                name=validated_data["name"],
                parent=validated_data.get("parent"),
                commission_bp=validated_data.get("commission_bp"),
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(serializers.as_serializer_error(exc)) from exc
        except IntegrityError as exc:
            # Two requests creating the same code at once: the loser's check passed before the winner committed.
            raise serializers.ValidationError({"code": [str(DUPLICATE_CODE)]}) from exc


class _ParentCode(serializers.CharField):
    """A partner code, or empty for the top partners (present and empty is not absent here)."""

    def to_internal_value(self, value: object) -> str:
        if not isinstance(value, str) or (value and not could_be_code(value)):
            raise serializers.ValidationError(gettext("parent must be a partner code."))
        return value


class PartnerListQuery(serializers.Serializer):
    """The query parameters of ``GET partners/``: validates them and is what the schema documents."""

    parent = _ParentCode(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="Children of this partner code; empty: top partners.",
    )
    level = QueryChoice(choices=[1, 2, 3], required=False, help_text="Only partners at this level.")
