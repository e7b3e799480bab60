"""Settings: every value comes from the environment, with defaults that run the product on one machine.

The variables are listed in the README's configuration table; the stats options live in one dict,
``CPS_STATS``, read through ``stats.conf.stats_setting`` (defaults in ``stats/conf.py``).
"""

import os
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = BASE_DIR / ".run"
RUN_DIR.mkdir(exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# --- Security -----------------------------------------------------------------------------------------
# Production is the default: DEBUG is off and SECRET_KEY must be set. The demo (CPS_DEMO=1, set by
# scripts/demo) or DEBUG=1 opts into a development key; the test suite sets its own (tests/settings.py).
CPS_DEMO = env_bool("CPS_DEMO", False)
DEBUG = env_bool("DEBUG", CPS_DEMO)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and not CPS_DEMO:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "SECRET_KEY is not set: export a long random SECRET_KEY (or CPS_DEMO=1 / DEBUG=1 for a development run)"
        )
    SECRET_KEY = "dev-only-insecure-key-change-me-in-production"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
# Served over HTTPS (CPS_HTTPS=1): redirect plain HTTP, send cookies over HTTPS only, and ask browsers to
# use HTTPS only for a year (HSTS). Off by default so the demo and the tests speak plain HTTP.
CPS_HTTPS = env_bool("CPS_HTTPS", False)
SECURE_SSL_REDIRECT = CPS_HTTPS
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = CPS_HTTPS
SECURE_HSTS_SECONDS = env_int("CPS_HSTS_SECONDS", 365 * 86400 if CPS_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("CPS_HSTS_INCLUDE_SUBDOMAINS", CPS_HTTPS)
SECURE_HSTS_PRELOAD = env_bool("CPS_HSTS_PRELOAD", CPS_HTTPS)
# Behind a TLS-terminating proxy (nginx) that sets e.g. X-Forwarded-Proto: the request is HTTPS when the
# header says "https". Set it only when the proxy overwrites the header, or a client could forge it.
if proxy_ssl_header := os.environ.get("CPS_PROXY_SSL_HEADER", ""):
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + proxy_ssl_header.upper().replace("-", "_"), "https")
# Prometheus scrapes /metrics with "Authorization: Bearer <token>"; empty: staff sessions only.
CPS_METRICS_TOKEN = os.environ.get("CPS_METRICS_TOKEN", "")

INSTALLED_APPS = [
    # The admin with the statistics dashboard as its index page (stats/dashboard/site.py).
    "stats.dashboard.apps.StatsAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    # Swagger UI and Redoc as static files: the API docs page works offline, with no CDN.
    "drf_spectacular_sidecar",
    "django_q",
    "partners",
    "stats",
    "loginlog",
    "conversions",
    "quality",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Right after security: serves /static/ from STATIC_ROOT (collectstatic) with far-future caching and
    # precompressed files, so the admin and the API docs are styled under gunicorn with no front proxy.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # After sessions, before common: the language comes from the session (the admin's switch), the
    # Accept-Language header, then LANGUAGE_CODE.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "cpsproject.urls"
WSGI_APPLICATION = "cpsproject.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------------------
# SQLite file by default (the embedded demo); a mysql:// URL selects mysqlclient with utf8mb4. Connections
# are kept for a minute on both: opening a SQLite file in WAL mode for every request cost 1.2 ms of CPU, more
# than the queries of a year of partner stats (bench/README, "API on gunicorn").
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"charset": "utf8mb4", "init_command": "SET sql_mode='STRICT_TRANS_TABLES'"}
    )
    DATABASES["default"]["TEST"] = {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so that tests spanning processes (the consumer run as a real process) share it.
    DATABASES["default"]["TEST"] = {"NAME": str(RUN_DIR / f"test-db-{os.getpid()}.sqlite3")}
    # A transaction takes the write lock when it begins (IMMEDIATE), so concurrent writers (the consumer, a
    # flush, close_month) queue for up to ``timeout`` seconds. Deferred, a writer that had read before another's
    # commit would fail at once with "database is locked" (SQLite cannot move its snapshot forward).
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis --------------------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# REDIS_URL names one node of a Redis Cluster (any node); the product spreads its keys over the slots.
REDIS_CLUSTER = env_bool("REDIS_CLUSTER", False)
CACHES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}
if REDIS_CLUSTER:
    CACHES["default"]["OPTIONS"]["CONNECTION_FACTORY"] = (
        "cpsproject.common.redis_cluster.ClusterConnectionFactory"
    )

# --- Raw-event archive, Kafka -------------------------------------------------------------------------
MONGO_URL = os.environ.get("MONGO_URL", "")
MONGO_DB = os.environ.get("MONGO_DB", "cps")
KAFKA_BOOTSTRAP_SERVERS = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
KAFKA_TOPIC = os.environ.get("KAFKA_TOPIC", "cps-events")
KAFKA_GROUP_ID = os.environ.get("KAFKA_GROUP_ID", "cps-stats")

# --- Time ---------------------------------------------------------------------------------------------
TIME_ZONE = os.environ.get("CPS_TIME_ZONE", "Asia/Shanghai")
USE_TZ = True

# --- Language: staff read Chinese; English stays selectable from the admin header -------------------------
LANGUAGE_CODE = os.environ.get("CPS_LANGUAGE_CODE", "zh-hans")
LANGUAGES = [("zh-hans", "简体中文"), ("en", "English")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Counts are grouped by thousands in every language (cpsproject/formats); USE_THOUSAND_SEPARATOR stays off so
# that identifiers (user ids, offsets) stay as typed, and the admin groups the counts it shows.
FORMAT_MODULE_PATH = ["cpsproject.formats"]
USE_I18N = True

STATIC_URL = "static/"
# collectstatic copies every app's files here; WhiteNoise serves them. CPS_STATIC_ROOT moves it (the Docker
# image collects at build time into /app/static).
STATIC_ROOT = Path(os.environ.get("CPS_STATIC_ROOT", RUN_DIR / "static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed names (cached for a year by browsers) and gzip/brotli copies made once by collectstatic. Pages
    # then name files through the manifest: a file missing from it fails the page loudly instead of a 404.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# --- Redis keys and job locks (cpsproject.common) --------------------------------------------------------
# Every Redis key starts with "{CPS_REDIS_PREFIX}:"; the braces make it a Redis Cluster hash tag.
CPS_REDIS_PREFIX = os.environ.get("CPS_REDIS_PREFIX", "cps")
# A job's lock lives this long unless its heartbeat renews it (every third of it) while the job runs.
CPS_LOCK_SECONDS = env_int("CPS_LOCK_SECONDS", 120)

# --- App options: what the environment sets; every other option has its default in the app's conf.py -----
CPS_STATS = {
    "MAX_LATENESS_SECONDS": env_int("CPS_MAX_LATENESS_SECONDS", 7 * 86400),
    "KAFKA_SESSION_TIMEOUT_MS": env_int("CPS_KAFKA_SESSION_TIMEOUT_MS", 10_000),
}

CPS_CONVERSIONS = {
    "REPORTING_CURRENCY": os.environ.get("CPS_REPORTING_CURRENCY", "CNY"),
    "ATTRIBUTION_WINDOW_DAYS": env_int("CPS_ATTRIBUTION_WINDOW_DAYS", 30),
    "COMMISSION_BP": [int(v) if v.isdigit() else v for v in env_list("CPS_COMMISSION_BP", "500,300,200")],
    "COMMISSION_SHARES": [
        int(v) if v.isdigit() else v for v in env_list("CPS_COMMISSION_SHARES", "8000,1500,500")
    ],
}

CPS_QUALITY = {
    "REPEAT_SECONDS": env_int("CPS_REPEAT_SECONDS", 30),
    "MIN_ORDERS": env_int("CPS_QUALITY_MIN_ORDERS", 5),
}

CPS_LOGINS = {
    "RETENTION_DAYS": env_int("CPS_LOGIN_RETENTION_DAYS", 62),
    "MAX_USER_ID": env_int("CPS_MAX_USER_ID", 2**24 - 1),
}


# --- API throttling -----------------------------------------------------------------------------------
def env_rate(name: str, default: str) -> str | None:
    """A DRF throttle rate ("N/s", "N/min", "N/hour", "N/day"), or None (no limit) for "none"."""
    value = os.environ.get(name, default).strip()
    return None if value.lower() == "none" else value


# Read per request by partners.throttling, so tests may override them.
API_THROTTLE_RATES = {
    # Requests that fail to authenticate (wrong or missing credentials), per client address; over it, the
    # address gets 429 before any password is hashed.
    "auth_failure": env_rate("CPS_THROTTLE_AUTH_FAILURES", "20/min"),
    "anon": env_rate("CPS_THROTTLE_ANON", "60/min"),
    # Staff (sessions, basic auth, service tokens), per user.
    "user": env_rate("CPS_THROTTLE_USER", "3000/min"),
    # Each partner portal token: a portal polls a few endpoints, it does not need the staff allowance.
    "portal": env_rate("CPS_THROTTLE_PORTAL", "600/min"),
}
# The longest start..end range any API endpoint serves, in days (both ends inclusive).
CPS_API_MAX_RANGE_DAYS = env_int("CPS_API_MAX_RANGE_DAYS", 366)

# --- DRF ----------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First: refuses an address that failed too often before any password is hashed.
        "partners.throttling.FailedAuthenticationGate",
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
        # DRF's, in one query with the portal scope.
        "partners.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["partners.permissions.IsStaffOrPortal"],
    "DEFAULT_THROTTLE_CLASSES": [
        "partners.throttling.AnonThrottle",
        "partners.throttling.UserThrottle",
        "partners.throttling.PortalThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": API_THROTTLE_RATES,
    # Proxies in front of the web servers that append to X-Forwarded-For (nginx: 1). With 0 the client
    # address is REMOTE_ADDR, so a client cannot pick its own throttle key by sending the header.
    "NUM_PROXIES": env_int("CPS_NUM_PROXIES", 0),
    "EXCEPTION_HANDLER": "partners.throttling.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "cpsproject.common.params.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "cpsproject.common.params.Pagination",
    "PAGE_SIZE": 100,
    # JSON first, so that a client asking for nothing in particular (or */*) gets JSON; it also sends bodies a
    # view rendered itself (the stats endpoint's year of days). The browsable API answers a browser (text/html,
    # ?format=api) in production too: staff signed in to the admin read the API in the same browser.
    "DEFAULT_RENDERER_CLASSES": [
        "cpsproject.common.json_rendering.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # A ?format= the view cannot render is a 400 naming "format" (DRF's default answers a bare 404).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "cpsproject.common.params.FormatNegotiation",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # The browsable API's title and line above each endpoint, in the reader's language.
    "VIEW_NAME_FUNCTION": "cpsproject.common.browsable.view_name",
    "VIEW_DESCRIPTION_FUNCTION": "cpsproject.common.browsable.view_description",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "CPS partner statistics API",
    "DESCRIPTION": (
        "Partner PV/UV, 5-minute buckets, rankings, time series and user logins. Staff see everything; a "
        "partner portal token (`Authorization: Token ...`) sees its partner's subtree only. Dates are whole "
        "days in the business time zone; `?format=csv` streams CSV where listed. Errors: "
        '`{"error": code, "detail": sentence, <parameter>: [messages]}`.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Anyone may read the schema and the docs: they describe the API, not its data.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # The docs page loads Swagger UI from the sidecar's static files, never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Two "status" choice sets (orders, findings): the findings' gets a name of its own.
    "ENUM_NAME_OVERRIDES": {"FindingStatusEnum": ["open", "cleared", "confirmed"]},
    # The failed-authentication gate authenticates nobody: the schema lists the real ways in.
    "AUTHENTICATION_WHITELIST": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
        "partners.authentication.TokenAuthentication",
    ],
}

# --- django-q2 ----------------------------------------------------------------------------------------
Q_CLUSTER = {
    "name": "cps",
    "workers": env_int("Q_WORKERS", 2),
    "timeout": 540,
    "retry": 600,
    "orm": "default",
    "catch_up": False,
    "sync": env_bool("Q_SYNC", False),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"kafka": {"level": "WARNING"}, "django.db.backends": {"level": "INFO"}},
}
