"""The docs' commands run, or at least parse, and every command and variable they name exists.

Every fenced block in ``README.md``, ``docs/*.md`` and ``bench/README.md`` names its language, and every shell
block (``sh``) carries a marker on the line just before its fence, an HTML comment that Markdown does not show:

- ``<!-- docs-test: run -->``: every line runs. ``manage.py`` commands run in-process on the test database and
  the test's own Redis prefix (after the sample partner tree is imported, as the demo has it); paths under
  ``.run/`` go to the test's temporary folder; ``curl`` goes through Django's test client and must answer 2xx,
  or the status a ``# → 404`` comment on its line gives; ``NAME=$(… manage.py … | awk '{print $NF}')`` keeps
  the last word the command printed for ``$NAME``; ``export`` lines are checked, not applied (the test keeps its
  own database and Redis).
- ``<!-- docs-test: parse (why it cannot run here) -->``: every line is checked without running it: a
  ``manage.py`` command's arguments parse with its own parser, a script or module exists and has every long
  option the line gives it, pytest's paths and test names exist, a URL resolves to a view.
- ``<!-- docs-test: show (why it cannot even be parsed here) -->``: for tools the project does not install
  (profilers): only the variables the lines set and read are checked, with the page-wide checks below.

A shell block without a marker, a parse marker without a reason, or a line whose program the checker does not
know fails the test: nothing is skipped silently. Beyond the blocks, every ``manage.py <command>`` the docs
name is a command, every environment variable they set or name is read by the code, the configuration page
lists every variable the settings read with the default the settings apply, every ``CPS_STATS`` /
``CPS_LOGINS`` option, and the event contract lists every dead-letter reason.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command, get_commands, load_command_class
from django.test import Client
from django.urls import Resolver404, resolve

from conversions.conf import DEFAULTS as CONVERSION_DEFAULTS
from loginlog.conf import DEFAULTS as LOGIN_DEFAULTS
from quality.conf import DEFAULTS as QUALITY_DEFAULTS
from stats.conf import DEFAULTS as STATS_DEFAULTS
from stats.models import DeadLetter

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
CONFIGURATION = ROOT / "docs" / "configuration.md"
EVENTS = ROOT / "docs" / "events.md"

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<mode>run|parse|show)\s*(?:\((?P<why>[^)]*)\))?\s*-->\s*$")
EXPECTED_STATUS = re.compile(r"#\s*→\s*(\d{3})")
CAPTURE = re.compile(r"^(?P<name>[A-Z_][A-Z0-9_]*)=\$\((?P<inner>.+)\s*\|\s*awk '\{print \$NF\}'\)\s*(#.*)?$")
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
VARIABLE_REF = re.compile(r"\$\{?([A-Z_][A-Z0-9_]*)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
ENV_ASSIGNED = re.compile(r"(?:^|\s)([A-Z][A-Z0-9_]*)=")
ALL_CAPS_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
MANAGE_COMMAND = re.compile(r"manage\.py\s+([a-z_]+)")
PYTHONS = {"python", "python3", ".venv/bin/python"}
PYTESTS = {"pytest", ".venv/bin/pytest"}
# Variables the shell itself sets: a block may read them without the product reading them.
SHELL_VARIABLES = {"PWD", "HOME"}
# pytest's own short options and the plugin options scripts/test passes (``-p xdist -n 2``).
PYTEST_OPTIONS = {"-p", "-n", "-s", "-x", "-q", "-v", "-k", "--maxschedchunk"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    mode: str | None
    why: str | None
    body: list[str]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        """Return the block's commands: continuation lines joined, blank lines and whole-line comments left out."""
        joined: list[str] = []
        pending = ""
        for raw in self.body:
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            line = (pending + raw).strip()
            pending = ""
            if line and not line.startswith("#"):
                joined.append(line)
        return joined


def fenced_blocks(page: Path) -> list[Block]:
    """Return every fenced block of ``page`` with the marker on the line before its fence, if any."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        marker = MARKER.match(lines[index - 1]) if index else None
        blocks.append(
            Block(
                page=page,
                line=index + 1,
                language=opening.group(1),
                mode=marker.group("mode") if marker else None,
                why=(marker.group("why") or "").strip() if marker else None,
                body=lines[index + 1 : end],
            )
        )
        index = end + 1
    return blocks


def shell_blocks() -> list[Block]:
    return [block for page in PAGES for block in fenced_blocks(page) if block.language == "sh"]


def run_blocks() -> list[Block]:
    return [block for block in shell_blocks() if block.mode == "run"]


# --- What the code reads ---------------------------------------------------------------------------------
PY_ENV_READS = [
    re.compile(r"""os\.environ(?:\.get|\.setdefault|\.pop)?\(\s*["']([A-Z][A-Z0-9_]*)["']"""),
    re.compile(r"""os\.environ\[\s*["']([A-Z][A-Z0-9_]*)["']\s*\]"""),
    re.compile(r"""env_(?:bool|int|list|rate)\(\s*["']([A-Z][A-Z0-9_]*)["']"""),
    re.compile(r"""^[A-Z_]*ENV\s*=\s*["']([A-Z][A-Z0-9_]*)["']""", re.M),  # a name kept in a constant
]
SHELL_ENV_READ = re.compile(r"\$\{([A-Z][A-Z0-9_]*):-")


def settings_variables() -> set[str]:
    source = (ROOT / "cpsproject" / "settings.py").read_text(encoding="utf-8")
    return {name for pattern in PY_ENV_READS for name in pattern.findall(source)}


def known_variables() -> set[str]:
    """Return every environment variable the product, its scripts, its tests or its benchmarks read."""
    names: set[str] = set()
    for folder in ("cpsproject", "stats", "partners", "loginlog", "tests", "bench", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            names.update(name for pattern in PY_ENV_READS for name in pattern.findall(source))
    for path in (ROOT / "scripts").iterdir():
        if path.is_file() and not path.suffix:
            names.update(SHELL_ENV_READ.findall(path.read_text(encoding="utf-8")))
    return names


# --- Checking one line without running it -----------------------------------------------------------------
def split_assignments(words: list[str]) -> tuple[list[str], list[str]]:
    """Return the leading ``NAME=value`` words' names, and the words after them."""
    names = []
    while words and (assigned := ASSIGNMENT.match(words[0])) and assigned.group(1).isupper():
        names.append(assigned.group(1))
        words = words[1:]
    return names, words


def parse_manage_command(args: list[str]) -> str:
    """Parse ``manage.py`` arguments with the command's own parser; return the command's name."""
    name, *rest = args
    commands = get_commands()
    assert name in commands, f"manage.py {name}: no such command"
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    parser.parse_args(rest)  # a CommandError names the bad argument
    return name


def long_options(words: list[str]) -> list[str]:
    return [word.split("=")[0] for word in words if word.startswith("--")]


def check_options_in_source(words: list[str], source: Path, what: str) -> None:
    text = source.read_text(encoding="utf-8")
    for option in long_options(words):
        assert f'"{option}"' in text, f"{what} has no option {option} ({source.relative_to(ROOT)})"


def check_pytest_arguments(words: list[str]) -> None:
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
            continue
        if word.startswith("-"):
            option = word.split("=")[0]
            assert option in PYTEST_OPTIONS or f'"{option}"' in conftest, f"pytest has no option {option}"
            skip_next = option in {"-p", "-n", "-k", "--maxschedchunk"}
            continue
        path, _, test = word.partition("::")
        assert (ROOT / path).exists(), f"pytest: no such path {path}"
        if test:
            assert f"def {test}(" in (ROOT / path).read_text(encoding="utf-8"), f"pytest: no test {word}"


def check_url(url: str) -> str:
    """Return the path of ``url`` after checking that it resolves to a view."""
    parts = urlsplit(url)
    try:
        resolve(parts.path)
    except Resolver404:
        pytest.fail(f"curl: {parts.path} is no URL of the product")
    return parts.path + (f"?{parts.query}" if parts.query else "")


def check_variables(line: str, known: set[str], assigned: set[str]) -> list[str]:
    """Check the variables ``line`` sets and reads; return its words after the leading assignments."""
    if captured := CAPTURE.match(line):
        assigned.add(captured.group("name"))
        line = captured.group("inner")
    words = shlex.split(line, comments=True)
    exported = words[:1] == ["export"]
    names, words = split_assignments(words[1:] if exported else words)
    assert not (exported and words), f"export of something that is not NAME=value: {words}"
    for name in names:
        assert name in known, f"{name} is read by no code"
    for name in VARIABLE_REF.findall(line):
        assert name in known | SHELL_VARIABLES | assigned, f"${name} is set by nothing before it"
    return words


def check_line(line: str, known: set[str], assigned: set[str]) -> None:
    """Check one command without running it; fail naming what is wrong."""
    words = check_variables(line, known, assigned)
    if not words:
        return
    program, *args = words
    if program in PYTHONS and args[:1] == ["manage.py"]:
        parse_manage_command(args[1:])
    elif program in PYTHONS and args[:1] == ["-m"]:
        spec = importlib.util.find_spec(args[1])
        assert spec and spec.origin, f"python -m {args[1]}: no such module"
        check_options_in_source(args[2:], Path(spec.origin), f"python -m {args[1]}")
    elif program in PYTHONS:
        script = ROOT / args[0]
        assert script.is_file(), f"python {args[0]}: no such file"
        check_options_in_source(args[1:], script, args[0])
    elif program in PYTESTS:
        check_pytest_arguments(args)
    elif program.startswith("scripts/"):
        assert (ROOT / program).is_file(), f"{program}: no such script"
        if program == "scripts/test":
            check_pytest_arguments(args)
    elif program == "gunicorn":
        assert importlib.util.find_spec(args[0]), f"gunicorn {args[0]}: no such module"
    elif program == "curl":
        check_url(next(word for word in args if word.startswith("http")))
    else:
        pytest.fail(f"the docs test does not know the program {program!r}: teach it, or leave the line out")


# --- Running one line ------------------------------------------------------------------------------------
def in_tmp(word: str, tmp_path: Path) -> str:
    return word.replace(".run/", f"{tmp_path}/")


def run_manage_command(args: list[str], tmp_path: Path) -> str:
    """Run a ``manage.py`` command in-process; return what it printed."""
    name = parse_manage_command(args)
    out = io.StringIO()
    call_command(name, *(in_tmp(word, tmp_path) for word in args[1:]), stdout=out, stderr=io.StringIO())
    return out.getvalue()


def replay_curl(words: list[str], expected: int | None, variables: dict[str, str]) -> None:
    """Send what ``curl`` would send through Django's test client and check the status."""
    headers: dict[str, str] = {}
    url = ""
    index = 0
    while index < len(words):
        word = words[index]
        if word == "-H":
            key, _, value = words[index + 1].partition(":")
            headers["HTTP_" + key.strip().upper().replace("-", "_")] = value.strip()
            index += 1
        elif word.startswith("http"):
            url = word
        else:
            assert word == "-s", f"curl option {word} is not replayed by the docs test"
        index += 1
    for name, value in variables.items():
        url = url.replace(f"${name}", value)
        headers = {key: value_.replace(f"${name}", value) for key, value_ in headers.items()}
    response = Client().get(check_url(url), **headers)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    if expected is None:
        assert 200 <= response.status_code < 300, f"curl {url}: {response.status_code} {body[:300]!r}"
    else:
        assert response.status_code == expected, f"curl {url}: {response.status_code}, not {expected}"
    if response["Content-Type"].startswith("application/json"):
        json.loads(body)


def run_line(line: str, variables: dict[str, str], tmp_path: Path) -> None:
    if captured := CAPTURE.match(line):
        inner = shlex.split(captured.group("inner"))
        assert inner[0] in PYTHONS and inner[1] == "manage.py", f"only manage.py output is captured: {line}"
        printed = run_manage_command(inner[2:], tmp_path).split()
        assert printed, f"{line}: printed nothing"
        variables[captured.group("name")] = printed[-1]
        return
    expected = EXPECTED_STATUS.search(line)
    words = shlex.split(line, comments=True)
    if words[0] == "export":
        return  # checked by check_line; the test keeps its own database and Redis
    _, words = split_assignments(words)
    program, *args = words
    if program in PYTHONS and args[:1] == ["manage.py"]:
        run_manage_command(args[1:], tmp_path)
    elif program == "curl":
        replay_curl(args, int(expected.group(1)) if expected else None, variables)
    else:
        pytest.fail(f"a run block can run manage.py and curl lines only, not {program!r}")


# --- The tests -------------------------------------------------------------------------------------------
def test_every_fence_names_its_language_and_every_shell_block_its_marker() -> None:
    problems = []
    for page in PAGES:
        for block in fenced_blocks(page):
            if not block.language:
                problems.append(f"{block.where}: a fence without a language (sh, json, text, python, …)")
            elif block.language == "sh" and block.mode is None:
                problems.append(f"{block.where}: a shell block without a docs-test marker")
            elif block.mode in {"parse", "show"} and not block.why:
                problems.append(f"{block.where}: a {block.mode} marker must say why the block cannot run")
            elif block.mode and block.language != "sh":
                problems.append(f"{block.where}: a docs-test marker on a {block.language} block")
    assert not problems, "\n".join(problems)


def test_every_shell_line_parses_against_the_code() -> None:
    known = known_variables()
    blocks = shell_blocks()
    assert len(blocks) >= 10  # the pages hold their commands in marked blocks
    for block in blocks:
        assigned: set[str] = set()
        for line in block.commands():
            try:
                if block.mode == "show":
                    check_variables(line, known, assigned)
                else:
                    check_line(line, known, assigned)
            except Exception as error:
                pytest.fail(f"{block.where}: {line}\n  {type(error).__name__}: {error}")


@pytest.mark.django_db
@pytest.mark.parametrize("block", run_blocks(), ids=lambda block: block.where)
def test_run_blocks_run(block: Block, tmp_path: Path) -> None:
    call_command("import_partners", str(ROOT / "sample" / "partners.csv"), stdout=io.StringIO())
    variables: dict[str, str] = {}
    for line in block.commands():
        try:
            run_line(line, variables, tmp_path)
        except Exception as error:
            pytest.fail(f"{block.where}: {line}\n  {type(error).__name__}: {error}")


def test_the_readme_runs_the_first_hour_path() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150
    commands = "\n".join(line for block in fenced_blocks(ROOT / "README.md") for line in block.commands())
    for step in ("scripts/demo", "scripts/test", "manage.py portal_token", "curl", "pytest"):
        assert step in commands, f"the README's first hour lacks {step}"
    assert any(block.page.name == "README.md" for block in run_blocks())


def test_every_command_the_docs_name_exists() -> None:
    commands = get_commands()
    for page in PAGES:
        for name in MANAGE_COMMAND.findall(page.read_text(encoding="utf-8")):
            assert name in commands, f"{page.relative_to(ROOT)} names manage.py {name}, which does not exist"


def test_every_variable_the_docs_name_is_read_by_the_code() -> None:
    known = known_variables()
    options = set(STATS_DEFAULTS) | set(LOGIN_DEFAULTS) | set(CONVERSION_DEFAULTS) | set(QUALITY_DEFAULTS)
    problems = []
    for page in PAGES:
        for code in INLINE_CODE.findall(page.read_text(encoding="utf-8")):
            for name in ENV_ASSIGNED.findall(code):
                if name not in known:
                    problems.append(f"{page.relative_to(ROOT)}: `{code}` sets {name}, which no code reads")
            bare = code.strip()
            if ALL_CAPS_NAME.match(bare) and bare not in known | options and not hasattr(settings, bare):
                problems.append(f"{page.relative_to(ROOT)}: `{bare}` is no variable, option or setting")
    assert not problems, "\n".join(problems)


def table_rows(page: Path, first_header: str) -> dict[str, str]:
    """Return the rows of the tables whose first column is headed ``first_header``: first cell → second."""
    rows: dict[str, str] = {}
    in_table = False
    for line in page.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells:
            in_table = False
        elif cells[0] == first_header:
            in_table = True
        elif in_table and not set(cells[0]) <= {"-", ":"}:
            rows[cells[0].strip("`")] = cells[1]
    return rows


def settings_defaults() -> dict[str, object]:
    """Return each variable ``cpsproject/settings.py`` reads, with the default it applies when it is unset."""
    tree = ast.parse((ROOT / "cpsproject" / "settings.py").read_text(encoding="utf-8"))
    # What the defaults are built from, as on a machine where nothing is set (paths relative to the project).
    names = {"BASE_DIR": Path(""), "RUN_DIR": Path(".run"), "CPS_DEMO": False, "CPS_HTTPS": False}
    defaults: dict[str, object] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
            continue
        function = ast.unparse(node.func)
        if function not in {"os.environ.get", "env_bool", "env_int", "env_list", "env_rate"}:
            continue
        default = eval(ast.unparse(node.args[1]), {"__builtins__": {}}, names) if len(node.args) > 1 else ""
        if function == "env_bool":
            default = int(default)
        defaults[node.args[0].value] = default
    return defaults


def shown_default(cell: str) -> str:
    """Return the default a configuration cell shows: its first code span, or its first word."""
    code = INLINE_CODE.search(cell)
    return code.group(1) if code else cell.split()[0]


def test_the_configuration_page_lists_every_variable_with_its_default() -> None:
    documented = table_rows(CONFIGURATION, "variable")
    defaults = settings_defaults()
    assert set(defaults) == settings_variables()  # every variable the settings read has a default here
    assert sorted(set(defaults) - set(documented)) == [], "read by the settings, missing from the page"
    assert sorted(set(documented) - set(defaults)) == [], "on the page, not read by the settings"
    for name, default in defaults.items():
        expected = "unset" if default == "" else str(default)
        shown = shown_default(documented[name])
        assert shown == expected or (default == "" and shown in {"unset", "empty"}), (
            f"{name}: the page says {shown}, the settings default to {default!r}"
        )


@pytest.mark.parametrize(
    "header, defaults",
    [
        ("`CPS_STATS` option", STATS_DEFAULTS),
        ("`CPS_LOGINS` option", LOGIN_DEFAULTS),
        ("`CPS_CONVERSIONS` option", CONVERSION_DEFAULTS),
        ("`CPS_QUALITY` option", QUALITY_DEFAULTS),
    ],
)
def test_the_configuration_page_lists_every_option(header: str, defaults: dict) -> None:
    documented = table_rows(CONFIGURATION, header)
    assert sorted(documented) == sorted(defaults)
    for name, default in defaults.items():
        if isinstance(default, int):
            assert shown_default(documented[name]) == str(default), f"{name} defaults to {default}"


def test_the_event_contract_lists_every_dead_letter_reason() -> None:
    documented = table_rows(EVENTS, "reason")
    assert sorted(documented) == sorted(DeadLetter.Reason.values)


LINK = re.compile(r"\]\((?!https?://)([^)#\s]*)(?:#([^)\s]+))?\)")


def heading_anchors(page: Path) -> set[str]:
    """Return the anchors GitHub gives ``page``'s headings: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if heading := re.match(r"^#+\s+(.*)$", line):
            text = re.sub(r"[^\w\- ]", "", heading.group(1).lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def test_every_link_between_the_pages_lands() -> None:
    problems = []
    for page in PAGES:
        for target, anchor in LINK.findall(page.read_text(encoding="utf-8")):
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                problems.append(f"{page.relative_to(ROOT)}: link to {target}, which does not exist")
            elif anchor and anchor not in heading_anchors(path):
                problems.append(f"{page.relative_to(ROOT)}: link to {target}#{anchor}, no such heading")
    assert not problems, "\n".join(problems)
