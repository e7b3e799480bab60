"""Writes to the partner tree. Every path that creates or moves a partner (admin, API, CSV import) comes here."""

import csv
import io
import logging
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from rest_framework.authtoken.models import Token

from partners.models import CODE_VALIDATOR, MAX_LEVEL, Partner, PortalAccount
from partners.selectors import partner_subtree

logger = logging.getLogger(__name__)


def _path_of(*, parent: Partner | None, pk: int) -> str:
    return f"{parent.path if parent else '/'}{pk}/"


@transaction.atomic
def partner_create(
    *,
    code: str,
    name: str,
    parent: Partner | None = None,
    is_active: bool = True,
    commission_bp: int | None = None,
) -> Partner:
    """Create a partner under ``parent``; raise ``ValidationError`` for a duplicate code or a 4th level.

    ``commission_bp`` is the partner's own commission rate (0..10000 basis points, else ``ValidationError``);
    None leaves it at its level's default.
    """
    partner = Partner(code=code, name=name, parent=parent, is_active=is_active, commission_bp=commission_bp)
    partner.level = parent.level + 1 if parent else 1
    partner.full_clean(exclude=["path", "level"])
    partner.save()
    partner.path = _path_of(parent=parent, pk=partner.pk)
    Partner.objects.filter(pk=partner.pk).update(path=partner.path)
    return partner


def _subtree_height(partner: Partner) -> int:
    """Return how many levels the subtree spans below ``partner`` (0 for a leaf)."""
    deepest = max(partner_subtree(partner=partner).values_list("level", flat=True))
    return deepest - partner.level


@transaction.atomic
def partner_move(*, partner: Partner, new_parent: Partner | None) -> Partner:
    """Re-parent ``partner``, rewriting the level and path of every descendant.

    Raise ``ValidationError`` when the move makes a cycle or pushes any descendant below level 3.
    """
    partner = Partner.objects.select_for_update().get(pk=partner.pk)
    if new_parent is not None:
        new_parent = Partner.objects.get(pk=new_parent.pk)
        if new_parent.pk == partner.pk or new_parent.path.startswith(partner.path):
            raise ValidationError({"parent": "A partner cannot move under itself or its own descendant."})
    new_level = new_parent.level + 1 if new_parent else 1
    if new_level + _subtree_height(partner) > MAX_LEVEL:
        raise ValidationError(
            {"parent": f"The move would put part of {partner.code}'s subtree below level {MAX_LEVEL}."}
        )
    old_path, old_level = partner.path, partner.level
    new_path = _path_of(parent=new_parent, pk=partner.pk)
    for node in partner_subtree(partner=partner).select_for_update():
        node.path = new_path + node.path[len(old_path) :]
        node.level = new_level + (node.level - old_level)
        if node.pk == partner.pk:
            node.parent = new_parent
        node.save(update_fields=["path", "level", "parent", "updated_at"])
    partner.refresh_from_db()
    logger.info("moved partner %s under %s", partner.code, new_parent.code if new_parent else "the root")
    return partner


def partner_deactivate(*, partner: Partner, include_subtree: bool = False) -> int:
    """Deactivate a partner (and optionally its subtree); its new events become dead letters. Return rows."""
    qs = partner_subtree(partner=partner) if include_subtree else Partner.objects.filter(pk=partner.pk)
    return qs.update(is_active=False)


# --- CSV import -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportRow:
    line: int
    code: str
    name: str
    parent: str
    commission_bp: str = ""


class PartnerImportError(Exception):
    """The import was refused; ``errors`` holds one ``"line N: …"`` message per bad row."""

    def __init__(self, errors: list[str]):
        super().__init__(f"{len(errors)} bad row(s); nothing was imported")
        self.errors = errors


EXPECTED_HEADER = ["code", "name", "parent"]
# The optional fourth column: the partner's own commission rate in basis points; empty for its level's default.
COMMISSION_COLUMN = "commission_bp"


def _read_rows(text: str) -> tuple[list[ImportRow], list[str]]:
    """Return the rows of ``text`` with the line each starts on, and the problems of its shape.

    A quoted field may span lines, so a row is named by its first line; a quote never closed is named by the
    line it opens on, not the end of the file it ran to. Malformed CSV stops the reading there.
    """
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        return [], [_malformed(text, 1, exc)]
    columns = [h.strip().lower() for h in header or []]
    if columns not in (EXPECTED_HEADER, [*EXPECTED_HEADER, COMMISSION_COLUMN]):
        expected = f"{','.join(EXPECTED_HEADER)}[,{COMMISSION_COLUMN}]"
        return [], [f"line 1: the header must be {expected}, not {','.join(header or [])!r}"]
    rows, errors = [], []
    while True:
        line = reader.line_num + 1  # where the next row starts
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.append(_malformed(text, line, exc))
            break
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(columns):
            errors.append(
                f"line {line}: expected {len(columns)} columns ({','.join(columns)}), found {len(cells)}"
            )
            continue
        rows.append(ImportRow(line, *(c.strip() for c in cells)))
    return rows, errors


def _malformed(text: str, line: int, exc: csv.Error) -> str:
    """Say what is wrong with the CSV row starting on ``line``, naming the line of a quote never closed."""
    opened = _unclosed_quote(text.splitlines(keepends=True)[line - 1 :])
    if opened is not None:
        return f"line {line + opened}: a quote opens here and is never closed"
    return f"line {line}: not valid CSV ({exc})"


def _unclosed_quote(lines: list[str]) -> int | None:
    """Return the index in ``lines`` of the line whose quote is still open at the end, or None."""
    opened = None
    for index, text in enumerate(lines):
        position = 0
        while position < len(text):
            if text[position] == '"':
                if opened is None:
                    # Only a quote that starts a field opens one; elsewhere in an unquoted field it is text.
                    if position == 0 or text[position - 1] == ",":
                        opened = index
                elif text[position + 1 : position + 2] == '"':
                    position += 1  # a doubled quote inside a quoted field
                else:
                    opened = None
            position += 1
    return opened


def _check_rows(rows: list[ImportRow]) -> list[str]:
    """Return every problem in ``rows`` against each other and the database, each naming its line."""
    errors = []
    existing = {code: (level, pk) for code, level, pk in Partner.objects.values_list("code", "level", "id")}
    first_line: dict[str, int] = {}
    for row in rows:
        if row.commission_bp and _commission_bp(row) is None:
            errors.append(
                f"line {row.line}: commission_bp must be whole basis points from 0 to 10000 (or empty for the "
                f"level's default), not {row.commission_bp!r}"
            )
        if not row.code:
            errors.append(f"line {row.line}: code is empty")
            continue
        try:
            CODE_VALIDATOR(row.code)
        except ValidationError:
            errors.append(f"line {row.line}: code {row.code!r} has characters a code cannot have")
        if not row.name:
            errors.append(f"line {row.line}: name is empty")
        if row.code in existing:
            errors.append(f"line {row.line}: partner {row.code} already exists")
        if row.code in first_line:
            errors.append(
                f"line {row.line}: code {row.code} is repeated (first on line {first_line[row.code]})"
            )
        else:
            first_line[row.code] = row.line
    by_code = {row.code: row for row in rows if row.code}
    for row in rows:
        if row.parent and row.parent not in by_code and row.parent not in existing:
            errors.append(
                f"line {row.line}: parent {row.parent} is neither in the file nor an existing partner"
            )
    # Levels: walk each row's chain of parents inside the file, then into the database.
    for row in rows:
        seen, depth, current = {row.code}, 1, row
        while current.parent:
            if current.parent in existing:
                depth += existing[current.parent][0]
                break
            parent_row = by_code.get(current.parent)
            if parent_row is None:
                break
            if parent_row.code in seen:
                errors.append(f"line {row.line}: parent chain of {row.code} loops back to {parent_row.code}")
                depth = 0
                break
            seen.add(parent_row.code)
            depth += 1
            current = parent_row
        if depth > MAX_LEVEL:
            errors.append(
                f"line {row.line}: {row.code} would be level {depth}; partners are at most {MAX_LEVEL}"
            )
    return sorted(set(errors), key=lambda e: int(e.split(":")[0].split()[1]))


def _commission_bp(row: ImportRow) -> int | None:
    """The row's commission rate in basis points, or None when empty or not one (``_check_rows`` says so)."""
    text = row.commission_bp
    if not (text.isascii() and text.isdigit()) or int(text) > 10_000:
        return None
    return int(text)


@transaction.atomic
def partners_import_csv(*, text: str) -> list[Partner]:
    """Import ``code,name,parent[,commission_bp]`` rows all-or-nothing; raise ``PartnerImportError`` listing
    every bad line."""
    rows, errors = _read_rows(text)
    errors += _check_rows(rows) if rows else []
    if errors:
        raise PartnerImportError(errors)
    created: dict[str, Partner] = {}
    pending = list(rows)
    while pending:
        # Parents may come after their children in the file: create whatever has its parent ready.
        ready = [
            r
            for r in pending
            if not r.parent or r.parent in created or r.parent not in {p.code for p in pending}
        ]
        for row in ready:
            parent = created.get(row.parent) or (Partner.objects.get(code=row.parent) if row.parent else None)
            created[row.code] = partner_create(
                code=row.code, name=row.name, parent=parent, commission_bp=_commission_bp(row)
            )
        pending = [r for r in pending if r.code not in created]
    logger.info("imported %d partners", len(created))
    return list(created.values())


# --- Portal tokens --------------------------------------------------------------------------------------


def portal_token_issue(*, partner: Partner) -> str:
    """Create (or reuse) the portal user of ``partner`` and return its API token key."""
    user_model = get_user_model()
    with transaction.atomic():
        user, created = user_model.objects.get_or_create(
            username=f"portal-{partner.code}", defaults={"is_staff": False}
        )
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        PortalAccount.objects.update_or_create(user=user, defaults={"partner": partner})
        token, _ = Token.objects.get_or_create(user=user)
    return token.key
