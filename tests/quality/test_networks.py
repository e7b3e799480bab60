"""import_networks: all or nothing, every bad line named; the consumer's copy follows the table."""

import pytest
from django.core.management import CommandError, call_command

from quality.models import ListedNetwork
from quality.networks import listed_ranges
from quality.signals import client_address

pytestmark = pytest.mark.django_db


def listed(address: str) -> bool:
    return client_address(address)[2] in listed_ranges()


def test_a_file_replaces_the_list_and_the_consumer_sees_it(tmp_path, capsys):
    first = tmp_path / "first.csv"
    first.write_text("cidr,label\n198.51.100.0/24,hosting-x\n2001:db8:aa::/48,proxy-y\n")
    call_command("import_networks", str(first))
    assert capsys.readouterr().out.strip() == "imported 2 listed networks (the previous list is replaced)"
    assert (listed("198.51.100.77"), listed("2001:db8:aa::9"), listed("203.0.113.1")) == (True, True, False)

    second = tmp_path / "second.csv"
    second.write_text("203.0.113.0/25,vpn\n")
    call_command("import_networks", str(second))
    assert sorted(ListedNetwork.objects.values_list("cidr", "label")) == [("203.0.113.0/25", "vpn")]
    assert (listed("198.51.100.77"), listed("203.0.113.1"), listed("203.0.113.200")) == (False, True, False)


def test_a_bad_line_refuses_the_whole_file_naming_each(tmp_path):
    call_command_file = tmp_path / "bad.csv"
    call_command_file.write_text(
        "cidr,label\n198.51.100.0/24,ok\n999.0.0.0/8,bad\n10.0.0.0/33,bad\n1.2.3.0/24,a,b\n"
        + "x" * 70
        + ",y\n"
    )
    ListedNetwork.objects.create(cidr="192.0.2.0/24", label="kept")
    with pytest.raises(CommandError) as refused:
        call_command("import_networks", str(call_command_file))
    message = str(refused.value)
    assert message.startswith("line 3: '999.0.0.0/8' is not an IPv4 or IPv6 network; line 4: '10.0.0.0/33'")
    assert "line 5: 3 columns, expected cidr,label" in message
    assert "line 6: " in message
    assert list(ListedNetwork.objects.values_list("cidr", flat=True)) == ["192.0.2.0/24"]  # unchanged


def test_an_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("import_networks", str(tmp_path / "missing.csv"))
