"""The settings the test suite runs with (``pyproject.toml``): the product's own, given a test-only SECRET_KEY.

The product refuses to start without a SECRET_KEY outside the demo. Setting it in the environment, before the
product's settings read it, also hands it to the ``manage.py`` processes tests start (they inherit this
environment, ``DJANGO_SETTINGS_MODULE`` included).
"""

import os

os.environ.setdefault("SECRET_KEY", "tests-only-insecure-key-never-use-in-production")

from cpsproject.settings import *  # noqa: E402, F403

# Tests render the admin without running collectstatic: name static files as they are, not through the
# manifest that collectstatic writes (tests/browser/test_production.py runs the production storage).
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
