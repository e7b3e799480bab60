"""The column names of model fields, for the queries written as raw SQL."""

from django.db import models


def field_column(field: models.Field | models.ForeignObjectRel) -> str:
    """Return the database column of a concrete field."""
    # Django's types allow a field without a column (a relation's reverse side): no concrete field is one.
    if not isinstance(field, models.Field) or field.column is None:
        raise TypeError(f"{field.name} has no column")
    return field.column


def column(model: type[models.Model], name: str) -> str:
    """Return the database column of ``model``'s concrete field ``name``."""
    return field_column(model._meta.get_field(name))
