"""The type of a label: plain text, or a lazy translation (``gettext_lazy``) rendered when shown."""

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise

    Label: TypeAlias = str | _StrPromise
else:  # the checker's name for a lazy translation exists in Django's type stubs only
    Label = str
