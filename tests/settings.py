"""The settings the test suite runs with (``pyproject.toml``): the product's own, given a test-only SECRET_KEY.

The product refuses to start without a SECRET_KEY outside the demo. Setting it in the environment, before the
product's settings read it, also hands it to the ``manage.py`` processes tests start (they inherit this
environment, ``DJANGO_SETTINGS_MODULE`` included).

Under pytest-xdist each worker counts in a Redis logical database of its own (the one ``REDIS_URL`` names,
plus the worker's number), so that the per-test clean-up scans what that worker wrote, not what the server
holds; ``scripts/test`` gives its two database passes databases far enough apart not to meet.
"""

import os
from urllib.parse import urlsplit, urlunsplit

os.environ.setdefault("SECRET_KEY", "tests-only-insecure-key-never-use-in-production")


def _worker_redis_url(url: str, worker: str) -> str:
    """Return ``url`` with its database number moved up by the xdist worker's index (``gw3`` → +3)."""
    parts = urlsplit(url)
    base = int(parts.path.lstrip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{base + int(worker.removeprefix('gw'))}"))


# Shifted once: the ``manage.py`` children tests start inherit both this environment and the worker's name.
# A Redis Cluster has database 0 only: there the per-test key prefixes alone keep workers apart.
clustered = os.environ.get("REDIS_CLUSTER", "").strip().lower() in {"1", "true", "yes", "on"}
if (
    (worker := os.environ.get("PYTEST_XDIST_WORKER"))
    and not os.environ.get("CPS_TEST_REDIS_WORKER")
    and not clustered
):
    os.environ["CPS_TEST_REDIS_WORKER"] = worker
    os.environ["REDIS_URL"] = _worker_redis_url(
        os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), worker
    )

from cpsproject.settings import *  # noqa: E402, F403

# Creating a user and logging in hash a password twice: PBKDF2's 1.2 million rounds cost 0.45 s of CPU each,
# about a minute and a half per database pass, and no test is about the strength of the hash. The production
# hasher stays what cpsproject.settings says (tests/test_api_hostile.py counts verifications with its own).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Tests render the admin without running collectstatic: name static files as they are, not through the
# manifest that collectstatic writes (tests/browser/test_production.py runs the production storage).
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
