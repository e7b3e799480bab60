"""Token authentication in one SQL round trip: the token, its user and the user's portal scope together.

DRF's ``TokenAuthentication`` builds an ORM query for token → user (about 1 ms of CPU here, several times what
the database spends), and the portal permission then asks again for the portal's partner. Every portal request
pays both, so this class reads all three with one raw join, and hands the partner to
``partners.permissions`` for the rest of the request. Nothing is cached across requests: a deleted token, a
deactivated user, a re-pointed portal account count at the very next request.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.models import Model
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from cpsproject.common.columns import column
from partners.models import Partner, PortalAccount
from partners.permissions import SCOPE_FIELDS, partner_from_row, remember_portal_scope

# The user's fields a request reads; the others (last_login, names, …) load on access, as deferred fields.
_WANTED = {"id", "password", "username", "is_active", "is_staff", "is_superuser"}
_FLAGS = {"is_active", "is_staff", "is_superuser"}


def _user_fields(user_model: type[Model]) -> list[str]:
    # In the model's field order: Model.from_db places the values of a partial row by that order.
    return [field.attname for field in user_model._meta.concrete_fields if field.attname in _WANTED]


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token authentication (same header, same answers), in one query."""

    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, Token]:
        user_model = get_user_model()
        quote = connection.ops.quote_name
        user_fields = _user_fields(user_model)
        user_columns = [f"u.{quote(column(user_model, name))}" for name in user_fields]
        partner_columns = [f"p.{quote(column(Partner, name))}" for name in SCOPE_FIELDS]
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {', '.join(user_columns + partner_columns)}"
                f" FROM {quote(Token._meta.db_table)} t"
                f" JOIN {quote(user_model._meta.db_table)} u ON u.id = t.user_id"
                f" LEFT JOIN {quote(PortalAccount._meta.db_table)} a ON a.user_id = u.id"
                f" LEFT JOIN {quote(Partner._meta.db_table)} p ON p.id = a.partner_id"
                f" WHERE t.{quote(column(Token, 'key'))} = %s",
                [key],
            )
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user_values, partner_values = row[: len(user_fields)], row[len(user_fields) :]
        # MySQL answers booleans as 0 and 1.
        user_values = [
            bool(v) if name in _FLAGS else v for name, v in zip(user_fields, user_values, strict=True)
        ]
        user = user_model.from_db(connection.alias, user_fields, user_values)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        scope = partner_from_row(partner_values) if partner_values[0] is not None else None
        remember_portal_scope(user, scope)
        token = Token(key=key, user=user)
        token._state.adding, token._state.db = False, connection.alias
        return user, token
