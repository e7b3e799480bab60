"""Outside the demo the product refuses to start without a SECRET_KEY, and the documented production
environment passes ``manage.py check --deploy`` with no warning. Real processes, as an operator starts them."""

import os
import subprocess
import sys

from tests.conftest import ROOT

# The production environment the README documents ("Running it in production"), minus the services.
PRODUCTION_ENV = {
    "SECRET_KEY": "k3y-Φ-" + "7fQ2x9LpZr4Wv8sNc1Hm5Tj0Gd6Yb3Ke" * 2,
    "DEBUG": "0",
    "ALLOWED_HOSTS": "stats.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://stats.example.com",
    "CPS_HTTPS": "1",
    "CPS_PROXY_SSL_HEADER": "X-Forwarded-Proto",
}
# Variables of this test run that would hide what the product does on its own.
CLEARED = ("SECRET_KEY", "DEBUG", "CPS_DEMO", "CPS_HTTPS", "CPS_PROXY_SSL_HEADER", "DJANGO_SETTINGS_MODULE")


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in CLEARED}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "cpsproject.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_secret_key_refuses_to_start_with_one_line():
    run = manage("check")
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: SECRET_KEY is not set: export a long random SECRET_KEY"
        " (or CPS_DEMO=1 / DEBUG=1 for a development run)"
    )


def test_the_demo_and_debug_runs_start_with_a_development_key():
    assert manage("check", CPS_DEMO="1").returncode == 0
    assert manage("check", DEBUG="1").returncode == 0


def test_debug_is_off_unless_asked_for():
    script = "from django.conf import settings; print(settings.DEBUG)"
    assert manage("shell", "-c", script, SECRET_KEY="x" * 60).stdout.split()[-1] == "False"
    assert manage("shell", "-c", script, SECRET_KEY="x" * 60, DEBUG="1").stdout.split()[-1] == "True"


def test_the_documented_production_settings_pass_check_deploy():
    run = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION_ENV)
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.strip() == "System check identified no issues (0 silenced)."


def test_check_deploy_names_what_plain_http_leaves_open():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "CPS_HTTPS"}
    run = manage("check", "--deploy", **env)
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in run.stderr
