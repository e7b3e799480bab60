"""On MySQL and MariaDB, compare the archive's event ids and openids byte for byte.

Their default collations ignore case, accents and trailing spaces, so the unique key on ``event_id`` took
``"e-1"``, ``"E-1"`` and ``"e-1 "`` for one event (the later ones were dropped as repeats) and the exact recount,
which counts users as the rows sorted by openid pass, merged or split openids the counters keep apart. A binary
collation with no padding makes them as distinct as they are in Redis, MongoDB and SQLite. Django has no
per-backend collation for a field, hence SQL here; other backends already compare bytes.
"""

from django.db import migrations

COLUMNS = ("event_id", "openid")


def _binary_collation(connection) -> str:
    # Both compare code points and keep trailing spaces (NO PAD); plain utf8mb4_bin pads.
    return "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"


def _set_collation(schema_editor, collation: str | None) -> None:
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    collation = collation or _binary_collation(connection)
    table = schema_editor.quote_name("stats_rawevent")
    changes = ", ".join(
        f"MODIFY {schema_editor.quote_name(column)} varchar(128) CHARACTER SET utf8mb4 COLLATE {collation} NOT NULL"
        for column in COLUMNS
    )
    schema_editor.execute(f"ALTER TABLE {table} {changes}")


def compare_bytes(apps, schema_editor) -> None:
    _set_collation(schema_editor, None)


def compare_as_text(apps, schema_editor) -> None:
    _set_collation(schema_editor, "utf8mb4_unicode_ci")


class Migration(migrations.Migration):
    dependencies = [
        ("stats", "0005_archive_rows_in_arrival_order"),
    ]

    # MySQL cannot roll DDL back, and Django refuses DDL inside a transaction there.
    operations = [migrations.RunPython(compare_bytes, compare_as_text, atomic=False, elidable=False)]
