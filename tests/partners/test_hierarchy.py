import pytest
from django.core.exceptions import ValidationError

from partners.models import Partner
from partners.selectors import partner_lineages, partner_subtree
from partners.services import partner_deactivate, partner_move
from tests.factories import create_partner, create_tree

pytestmark = pytest.mark.django_db


def ancestors(partner: Partner) -> list[Partner]:
    """The partner's ancestors from the root down, read from its materialised path."""
    by_id = Partner.objects.in_bulk(partner.ancestor_ids)
    return [by_id[pk] for pk in partner.ancestor_ids]


def test_levels_and_paths_follow_the_parent():
    tree = create_tree()
    assert [tree[c].level for c in ("A", "A1", "A1a", "A2", "B")] == [1, 2, 3, 2, 1]
    assert tree["A1a"].path == f"/{tree['A'].pk}/{tree['A1'].pk}/{tree['A1a'].pk}/"


def test_fourth_level_is_rejected():
    tree = create_tree()
    with pytest.raises(ValidationError, match="at most 3 levels"):
        create_partner("A1a-x", parent=tree["A1a"])
    assert not Partner.objects.filter(code="A1a-x").exists()


def test_duplicate_code_is_rejected():
    create_partner("A")
    with pytest.raises(ValidationError, match="already exists"):
        create_partner("A")


def test_move_under_own_descendant_is_a_cycle():
    tree = create_tree()
    with pytest.raises(ValidationError, match="under itself or its own descendant"):
        partner_move(partner=tree["A"], new_parent=tree["A1a"])
    with pytest.raises(ValidationError):
        partner_move(partner=tree["A"], new_parent=tree["A"])


def test_move_rewrites_every_descendant():
    tree = create_tree()
    partner_move(partner=tree["A1"], new_parent=tree["B"])
    a1, a1a = Partner.objects.get(code="A1"), Partner.objects.get(code="A1a")
    assert (a1.level, a1a.level) == (2, 3)
    assert a1a.path == f"/{tree['B'].pk}/{tree['A1'].pk}/{tree['A1a'].pk}/"
    assert sorted(p.code for p in partner_subtree(partner=Partner.objects.get(code="B"))) == [
        "A1",
        "A1a",
        "B",
    ]
    assert [p.code for p in ancestors(a1a)] == ["B", "A1"]


def test_move_to_root_lifts_levels():
    tree = create_tree()
    partner_move(partner=tree["A1"], new_parent=None)
    assert Partner.objects.get(code="A1").level == 1
    assert Partner.objects.get(code="A1a").level == 2


def test_move_that_would_make_a_fourth_level_is_rejected():
    tree = create_tree()
    with pytest.raises(ValidationError, match="below level 3"):
        partner_move(partner=tree["A1"], new_parent=tree["A2"])
    assert Partner.objects.get(code="A1a").level == 3


def test_lineages_list_codes_root_first():
    create_tree()
    partner_deactivate(partner=Partner.objects.get(code="A2"))
    lineages = partner_lineages()
    assert lineages["A1a"].codes == ("A", "A1", "A1a")
    assert lineages["A2"].is_active is False


def test_a_code_with_a_trailing_newline_is_rejected():
    with pytest.raises(ValidationError) as caught:
        create_partner("P9\n")
    assert "code" in caught.value.message_dict
    assert not Partner.objects.exists()
