"""Settings: every value comes from the environment, with defaults that run the product on one machine.

The variables are listed in the README's configuration table; the stats options live in one dict,
``CPS_STATS``, read through ``stats.conf.stats_setting`` (defaults in ``stats/conf.py``).
"""

import os
from pathlib import Path

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


SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only-insecure-key-change-me-in-production")
DEBUG = env_bool("DEBUG", True)
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

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
    "django_q",
    "partners",
    "stats",
    "loginlog",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
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
# SQLite file by default (the embedded demo); a mysql:// URL selects mysqlclient with utf8mb4.
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
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "init_command": "PRAGMA journal_mode=WAL;"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis --------------------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}

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
USE_I18N = True

STATIC_URL = "static/"
STATIC_ROOT = RUN_DIR / "static"

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
    "user": env_rate("CPS_THROTTLE_USER", "3000/min"),
}

# --- DRF ----------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First: refuses an address that failed too often before any password is hashed.
        "partners.throttling.FailedAuthenticationGate",
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["partners.permissions.IsStaffOrPortal"],
    "DEFAULT_THROTTLE_CLASSES": ["partners.throttling.AnonThrottle", "partners.throttling.UserThrottle"],
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
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}
if DEBUG:
    REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"].append("rest_framework.renderers.BrowsableAPIRenderer")

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
