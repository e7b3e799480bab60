from dataclasses import dataclass

from django.db.models import QuerySet

from partners.models import Partner


def partner_subtree(*, partner: Partner, include_self: bool = True) -> QuerySet[Partner]:
    """Return the partner's descendants (and the partner itself unless told otherwise)."""
    qs = Partner.objects.filter(path__startswith=partner.path)
    return qs if include_self else qs.exclude(pk=partner.pk)


@dataclass(frozen=True)
class Lineage:
    """What the ingest path needs to know of a partner code: its chain of codes, root first, and activity."""

    codes: tuple[str, ...]
    is_active: bool

    @property
    def code(self) -> str:
        return self.codes[-1]


def partner_lineages() -> dict[str, Lineage]:
    """Return every partner code mapped to its root-to-self chain of codes, in two queries' worth of rows."""
    rows = list(Partner.objects.values_list("id", "code", "path", "is_active"))
    code_by_id = {pk: code for pk, code, _, _ in rows}
    return {
        code: Lineage(
            codes=tuple(code_by_id[int(part)] for part in path.strip("/").split("/") if part),
            is_active=is_active,
        )
        for _, code, path, is_active in rows
    }
