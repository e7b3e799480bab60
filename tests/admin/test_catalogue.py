"""The Chinese catalogue ships complete, compiled, and in use: staff read Chinese by default."""

from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from tests.admin.conftest import CLOCK

CATALOGUE = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"


def test_every_entry_of_the_catalogue_is_translated_and_none_is_fuzzy():
    po = polib.pofile(str(CATALOGUE / "django.po"))
    live = [entry for entry in po if not entry.obsolete]
    assert len(live) > 100
    assert [e.msgid for e in live if not e.translated()] == []
    assert [e.msgid for e in live if "fuzzy" in e.flags] == []


def test_the_compiled_catalogue_matches_the_po_file():
    po = polib.pofile(str(CATALOGUE / "django.po"))
    mo = polib.mofile(str(CATALOGUE / "django.mo"))
    translated = {(e.msgid, e.msgstr or e.msgstr_plural.get(0, "")) for e in po if e.translated()}
    compiled = {(e.msgid, e.msgstr or e.msgstr_plural.get(0, "")) for e in mo if e.msgid}
    assert translated == compiled, "run: python manage.py compilemessages -l zh_Hans"


@pytest.mark.django_db
@pytest.mark.time_machine(CLOCK, tick=False)
def test_the_admin_speaks_chinese_by_default_and_english_on_request(client, settings):
    settings.LANGUAGE_CODE = "zh-hans"  # the product's default (the suite runs in English)
    get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    chinese = client.get("/admin/").content.decode()
    assert "统计看板" in chinese and "今日 PV" in chinese and "导流商排行" in chinese
    daily = client.get("/admin/stats/dailystat/").content.decode()
    assert "下载 CSV" in daily and "日期范围" in daily
    client.post("/i18n/setlang/", {"language": "en", "next": "/admin/"})
    english = client.get("/admin/").content.decode()
    assert "Statistics dashboard" in english and "PV today" in english
