import pytest
from django.core.management import CommandError, call_command

from partners.models import Partner
from tests.factories import create_partner

pytestmark = pytest.mark.django_db


def write(tmp_path, text: str):
    path = tmp_path / "partners.csv"
    path.write_text(text)
    return path


def test_import_creates_tree_with_parents_after_children(tmp_path, capsys):
    path = write(tmp_path, "code,name,parent\nC1a,Leaf,C1\nC1,Child,C\nC,Root,\n")
    call_command("import_partners", str(path))
    assert {p.code: p.level for p in Partner.objects.all()} == {"C": 1, "C1": 2, "C1a": 3}
    assert "imported 3 partners" in capsys.readouterr().out


def test_import_is_all_or_nothing_and_names_every_bad_line(tmp_path, capsys):
    create_partner("EXISTING")
    path = write(
        tmp_path,
        "code,name,parent\n"
        "R,Root,\n"  # line 2: fine
        "R1,Child,R\n"  # line 3: fine
        "R1a,Grandchild,R1\n"  # line 4: fine
        "R1a9,Too deep,R1a\n"  # line 5: 4th level
        "EXISTING,Dup of db,\n"  # line 6: already exists
        "X,No parent,MISSING\n"  # line 7: unknown parent
        "R,Again,\n"  # line 8: repeated in file
        "L1,Loop,L2\nL2,Loop,L1\n",  # lines 9-10: cycle
    )
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_partners", str(path))
    err = capsys.readouterr().err
    assert "line 5: R1a9 would be level 4" in err
    assert "line 6: partner EXISTING already exists" in err
    assert "line 7: parent MISSING" in err
    assert "line 8: code R is repeated (first on line 2)" in err
    assert "line 9: parent chain of L1 loops back" in err
    assert "line 10: parent chain of L2 loops back" in err
    assert list(Partner.objects.values_list("code", flat=True)) == ["EXISTING"]


def test_import_extends_an_existing_partner(tmp_path):
    create_partner("ROOT")
    call_command("import_partners", str(write(tmp_path, "code,name,parent\nKID,Kid,ROOT\n")))
    assert Partner.objects.get(code="KID").level == 2


def test_import_rejects_a_wrong_header(tmp_path):
    with pytest.raises(CommandError):
        call_command("import_partners", str(write(tmp_path, "id,title\n1,x\n")))
    assert Partner.objects.count() == 0


def test_an_unclosed_quote_is_reported_on_the_line_it_opens(tmp_path, capsys):
    path = write(
        tmp_path,
        'code,name,parent\nA,Alpha,\nB,"Beta,A\nC,Gamma,A\nD,Delta,A\n',  # the quote of line 3 runs to the end
    )
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_partners", str(path))
    assert capsys.readouterr().err.splitlines() == ["line 3: a quote opens here and is never closed"]
    assert not Partner.objects.exists()


def test_a_name_over_two_lines_keeps_the_lines_after_it_numbered(tmp_path, capsys):
    path = write(tmp_path, 'code,name,parent\nA,"Alpha\nand more",\nB,,A\nC,"Gam""ma",A\n')
    with pytest.raises(CommandError):
        call_command("import_partners", str(path))
    assert capsys.readouterr().err.splitlines() == ["line 4: name is empty"]
    path = write(tmp_path, 'code,name,parent\nA,"Alpha\nand more",\nB,"Beta" and more,A\n')
    with pytest.raises(CommandError):
        call_command("import_partners", str(path))
    assert capsys.readouterr().err.splitlines() == ["line 4: not valid CSV (',' expected after '\"')"]
