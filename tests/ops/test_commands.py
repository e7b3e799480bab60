"""Every management command of every installed app answers ``--help`` (what an operator tries first)."""

import pytest
from django.core.management import get_commands, load_command_class


@pytest.mark.parametrize("name", sorted(get_commands()))
def test_every_command_prints_its_help_and_exits_zero(name, capsys):
    command = load_command_class(get_commands()[name], name)
    with pytest.raises(SystemExit) as exited:
        command.run_from_argv(["manage.py", name, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: manage.py {name} ")
