import datetime as dt
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from conversions.models import ExchangeRate

pytestmark = pytest.mark.django_db


def write(tmp_path, text: str):
    path = tmp_path / "rates.csv"
    path.write_text(text)
    return path


def stored() -> dict[tuple[str, str], str]:
    return {
        (r.currency, r.valid_from.isoformat()): str(r.rate.normalize()) for r in ExchangeRate.objects.all()
    }


def test_import_stores_each_rate_exactly(tmp_path, capsys):
    path = write(
        tmp_path,
        "currency,valid_from,rate\nUSD,2026-11-01,7.1234\nJPY,2026-11-01,0.047312\nUSD,2026-12-01,7.2\n",
    )
    call_command("import_rates", str(path))
    assert stored() == {
        ("USD", "2026-11-01"): "7.1234",
        ("JPY", "2026-11-01"): "0.047312",
        ("USD", "2026-12-01"): "7.2",
    }
    assert f"imported 3 exchange rates from {path} (0 already there)" in capsys.readouterr().out


def test_importing_the_same_rows_again_adds_nothing(tmp_path, capsys):
    path = write(tmp_path, "currency,valid_from,rate\nUSD,2026-11-01,7.1234\n")
    call_command("import_rates", str(path))
    # The same rate written with other trailing zeros is the same rate.
    call_command("import_rates", str(write(tmp_path, "currency,valid_from,rate\nUSD,2026-11-01,7.12340\n")))
    assert ExchangeRate.objects.count() == 1
    assert "imported 0 exchange rates" in capsys.readouterr().out.splitlines()[-1]


def test_a_changed_rate_for_a_stored_day_is_refused_naming_its_line(tmp_path, capsys):
    call_command("import_rates", str(write(tmp_path, "currency,valid_from,rate\nUSD,2026-11-01,7.1234\n")))
    path = write(tmp_path, "currency,valid_from,rate\nEUR,2026-11-01,7.7\nUSD,2026-11-01,7.13\n")
    with pytest.raises(CommandError, match="1 bad row"):
        call_command("import_rates", str(path))
    err = capsys.readouterr().err
    assert "line 3: USD from 2026-11-01 is already 7.1234, not 7.13" in err
    assert stored() == {("USD", "2026-11-01"): "7.1234"}  # EUR, on a good line, was not imported either


def test_import_is_all_or_nothing_and_names_every_bad_line(tmp_path, capsys):
    path = write(
        tmp_path,
        "currency,valid_from,rate\n"
        "USD,2026-11-01,7.1\n"  # 2: fine
        "ABC,2026-11-01,1\n"  # 3: no currency
        "XXX,2026-11-01,1\n"  # 4: a code without minor units
        "CNY,2026-11-01,1\n"  # 5: the reporting currency
        "EUR,2026-11-31,7.7\n"  # 6: no such day
        "EUR,2026/11/01,7.7\n"  # 7: not YYYY-MM-DD
        "EUR,2026-11-01,0\n"  # 8: not above 0
        "EUR,2026-11-02,-7.7\n"  # 9: negative
        "EUR,2026-11-03,7.7e0\n"  # 10: not a plain decimal
        "EUR,2026-11-04,0.0000000000001\n"  # 11: 13 decimals
        "USD,2026-11-01,7.1\n"  # 12: repeated
        "EUR,2026-11-05\n",  # 13: a column missing
    )
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_rates", str(path))
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err] == [f"line {n}" for n in range(3, 14)]
    assert "line 3: 'ABC' is not an ISO 4217 currency" in err[0]
    assert "line 4: 'XXX' is not an ISO 4217 currency" in err[1]
    assert "line 5: CNY is the reporting currency" in err[2]
    assert "line 6: valid_from must be a date as YYYY-MM-DD, not '2026-11-31'" in err[3]
    assert "line 8: rate must be a decimal number above 0" in err[5]
    assert "line 12: USD from 2026-11-01 is repeated (first on line 2)" in err[9]
    assert "line 13: expected 3 columns" in err[10]
    assert ExchangeRate.objects.count() == 0


def test_a_wrong_header_or_unreadable_file_is_one_line(tmp_path, capsys):
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_rates", str(write(tmp_path, "code,day,rate\nUSD,2026-11-01,7\n")))
    assert (
        "line 1: the header must be currency,valid_from,rate, not 'code,day,rate'" in capsys.readouterr().err
    )
    with pytest.raises(CommandError, match="cannot read"):
        call_command("import_rates", str(tmp_path / "missing.csv"))


def test_rate_keeps_twelve_decimals(tmp_path):
    call_command(
        "import_rates", str(write(tmp_path, "currency,valid_from,rate\nJPY,2026-01-01,0.047312345678\n"))
    )
    assert ExchangeRate.objects.get().rate == Decimal("0.047312345678")
    assert ExchangeRate.objects.get().valid_from == dt.date(2026, 1, 1)
