from django.db.models import QuerySet

from partners.models import Partner


def partner_subtree(*, partner: Partner, include_self: bool = True) -> QuerySet[Partner]:
    """Return the partner's descendants (and the partner itself unless told otherwise)."""
    qs = Partner.objects.filter(path__startswith=partner.path)
    return qs if include_self else qs.exclude(pk=partner.pk)


class Lineage:
    """What the ingest path needs to know of a partner code: its chain of codes, root first, and activity.

    Compared and hashed by identity: the counters group a batch's events by lineage, and one directory load
    holds one object per code, so hashing the chain per event would be wasted work.
    """

    __slots__ = ("codes", "is_active", "code")

    def __init__(self, codes: tuple[str, ...], is_active: bool) -> None:
        self.codes = codes
        self.is_active = is_active
        self.code = codes[-1]

    def __repr__(self) -> str:
        return f"Lineage({'/'.join(self.codes)}{'' if self.is_active else ', inactive'})"


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
