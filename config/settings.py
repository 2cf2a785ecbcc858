"""Parley's settings, read from the environment with embedded defaults that need nothing else.

The defaults run the whole product in one Daphne process: SQLite in WAL mode and the in-memory
channel layer. Scale-out is chosen by environment: DATABASE_URL (PostgreSQL) and
CHANNEL_LAYER_URL or REDIS_URL (Redis; or PARLEY_REDIS_SENTINELS, Redis through Sentinel), with
any number of Daphne processes behind a balancer.
"""

import ipaddress
import re
import secrets
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("PARLEY_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept under var/.

    A key kept on disk survives restarts (sessions stay valid) without shipping a known key.
    """
    if key := env.str("SECRET_KEY", default=""):
        return key
    path = VAR_DIR / "secret-key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


DEBUG = env.bool("PARLEY_DEBUG", default=False)
SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Served over https by a proxy that ends TLS and is the only way to the processes (PARLEY_HTTPS):
# the proxy's X-Forwarded-Proto says whether a request came over https, and its
# X-Forwarded-For whom from (core.lockout.client_address); the session and CSRF cookies go over
# https only; browsers are told to use nothing else (HSTS); plain http is redirected, but for
# the load balancer's and Prometheus' endpoints, which reach the processes directly.
PARLEY_HTTPS = env.bool("PARLEY_HTTPS", default=False)
if PARLEY_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    # A year, subdomains included; preloading is a commitment the operator makes, hard to undo,
    # never a default (hstspreload.org asks projects not to turn it on for people).
    SECURE_HSTS_SECONDS = env.int("PARLEY_HSTS_SECONDS", default=365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("PARLEY_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("PARLEY_HSTS_PRELOAD", default=False)
# Django's deploy checks look for its security, CSRF and clickjacking middleware by dotted path,
# and so miss core.middleware's subclasses of them: core.checks looks for them by class, and runs
# the checks of what they do. Not preloading HSTS is a choice (above), not an oversight.
SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003"]
if PARLEY_HTTPS and not SECURE_HSTS_PRELOAD:
    SILENCED_SYSTEM_CHECKS.append("security.W021")

INSTALLED_APPS = [
    "daphne",
    "core",
    "django.contrib.admin",
    "django.contrib.auth",
    "axes",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "conversations",
    "selection",
    "activity",
    "search",
    "external",
    "reach",
    "accounts",
]

# Django's middleware, each in a subclass that runs on the event loop under ASGI rather than in
# a thread per step (see core.middleware.OnTheLoop); otherwise the same classes.
MIDDLEWARE = [
    # Outermost: a HEAD request's answer leaves with no body, whatever made it.
    "core.middleware.HeadWithoutBody",
    "core.middleware.SecurityMiddleware",
    # Outermost but one, so that every HTML answer gets the policy, error pages included.
    "core.middleware.ContentSecurityPolicyMiddleware",
    # Before anything reads the URL: no NUL reaches a view (or the database).
    "core.decoding.GatedUrlMiddleware",
    "core.middleware.WhiteNoiseMiddleware",
    "core.middleware.SessionMiddleware",
    "core.middleware.CommonMiddleware",
    "core.middleware.CsrfViewMiddleware",
    "core.middleware.AuthenticationMiddleware",
    "core.middleware.MessageMiddleware",
    "core.middleware.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a sign-in refused for a lockout into its page
    # (core.lockout). Async-capable; it reads the database only when it answers a lockout.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

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
                "selection.pages.waiting",
                "reach.settings_page.browser_choice",
                "accounts.password_pages.password_reset_offered",
            ],
        },
    },
]

# Database: SQLite in WAL mode unless DATABASE_URL says otherwise.
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'parley.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's SQLite backend, with write transactions taking turns in the process (see there).
    DATABASES["default"]["ENGINE"] = "config.sqlite"
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            # WAL lets the socket replays read while a turn writes; IMMEDIATE takes the write
            # lock at BEGIN, so two writers queue on the busy timeout instead of deadlocking
            # on a lock upgrade.
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
# Under ASGI each request runs in a thread of its own, so persistent connections would leak;
# Django's advice is 0 here. The turn runner and the event feeds keep their own long-lived
# database threads (core.dbthreads), which is where reuse matters.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("PARLEY_DB_CONN_MAX_AGE", default=0)
# Persistent connections (CONN_MAX_AGE above 0) are checked before each request reuses them.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # A process stalled inside a transaction (paused, swapping, partitioned) would hold its row
    # locks, and block the process that reaps its turns, for as long as it stalls. PostgreSQL
    # ends such a session after half a turn lease, so the lease decides, as designed.
    _idle_ms = env.int("PARLEY_TURN_LEASE_SECONDS", default=10) * 500
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options["options"] = (
        f"{_options.get('options', '')} -c idle_in_transaction_session_timeout={_idle_ms}"
    ).strip()
    # A database that does not answer fails an attempt in seconds, and the attempt is retried.
    _options.setdefault("connect_timeout", 5)
    if env.bool("PARLEY_DB_POOL", default=True) and not DATABASES["default"]["CONN_MAX_AGE"]:
        # Under ASGI every request runs in a thread of its own, so without a pool each request
        # opens (and PostgreSQL forks a backend for) a connection of its own. Pooled connections
        # are checked as they are handed out by the backend itself, not by psycopg's pool
        # (config.postgresql says why), so Django's CONN_HEALTH_CHECKS is off for them.
        DATABASES["default"]["ENGINE"] = "config.postgresql"
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
        _options["pool"] = {
            "min_size": 2,
            "max_size": env.int("PARLEY_DB_POOL_SIZE", default=20),
            "timeout": 20,
        }
# PgBouncer in transaction mode (README, "PgBouncer"): DATABASE_URL names PgBouncer, and
# PARLEY_DB_PGBOUNCER=1 says so, as nothing on the wire does. Each transaction may then run on a
# different server connection, so nothing may outlive a transaction on the server:
# - no server-side cursors (.iterator() would DECLARE a cursor that the next fetch, on another
#   connection, does not find): Django fetches in chunks from an ordinary query instead;
# - no prepared statements (psycopg prepares a query run often, and runs it later by name on a
#   connection that never saw it): client-side binding and psycopg's prepare_threshold None;
# - no `options` startup parameter, which PgBouncer refuses: the idle-in-transaction limit set
#   above is PgBouncer's own idle_transaction_timeout instead (ops/deploy/pgbouncer.ini), not a
#   session-level SET, which would stay on whichever server connection ran it.
# Parley's locks are transaction-scoped (pg_advisory_xact_lock, SELECT ... FOR UPDATE), and it
# uses no LISTEN/NOTIFY, temporary tables or session SETs (the time zone PgBouncer tracks).
PARLEY_DB_PGBOUNCER = env.bool("PARLEY_DB_PGBOUNCER", default=False)
if PARLEY_DB_PGBOUNCER and DATABASES["default"]["ENGINE"] != "config.sqlite":
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options.pop("options", None)
    _options["server_side_binding"] = False
    _options["prepare_threshold"] = None
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Channel layer: in-memory in one process; Redis when a URL is given.
_layer_url = env.str("CHANNEL_LAYER_URL", default="") or env.str("REDIS_URL", default="")
if _layer_url:
    CHANNEL_LAYERS = {
        "default": {
            # The pub/sub layer delivers a send in about 0.4 ms where the list-based core layer
            # takes about 2 ms on this machine; Parley treats the layer as at-most-once anyway.
            "BACKEND": env.str(
                "PARLEY_CHANNEL_LAYER_BACKEND",
                default="channels_redis.pubsub.RedisPubSubChannelLayer",
            ),
            "CONFIG": {"hosts": [_layer_url]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# The same Redis, when there is one, keeps what the processes must share of each person's limits
# (see core.slots and core.throttles); its keys start with this prefix.
PARLEY_REDIS_URL = _layer_url
PARLEY_REDIS_PREFIX = env.str("PARLEY_REDIS_PREFIX", default="parley")
# Django's cache holds the rate limits' counts (DRF's throttling): on Redis, shared by every
# process; otherwise in each process's memory.
if PARLEY_REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": PARLEY_REDIS_URL,
            "KEY_PREFIX": PARLEY_REDIS_PREFIX,
            # A Redis that does not answer fails a request's check in seconds, not never.
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Redis through Sentinel, instead of REDIS_URL: the sentinels to ask (host:port, comma
# separated; list every one) and the name they know the primary by (`sentinel monitor <name>`
# in ops/deploy/sentinel.conf). Everything on Redis (the channel layer, the cache, the slots,
# /readyz) asks them for the primary, and asks again when it stops answering, so a failover
# moves it to the promoted replica. PARLEY_REDIS_DB is the database number and
# PARLEY_REDIS_PASSWORD the primary's password (`requirepass`; empty: none).
PARLEY_REDIS_SENTINELS = [
    (host, int(port))
    for host, _, port in (
        item.strip().rpartition(":") for item in env.list("PARLEY_REDIS_SENTINELS", default=[])
    )
]
PARLEY_REDIS_SENTINEL_MASTER = env.str("PARLEY_REDIS_SENTINEL_MASTER", default="parley")
PARLEY_REDIS_DB = env.int("PARLEY_REDIS_DB", default=0)
PARLEY_REDIS_PASSWORD = env.str("PARLEY_REDIS_PASSWORD", default="")
if PARLEY_REDIS_SENTINELS:
    if PARLEY_REDIS_URL:
        raise ImproperlyConfigured(
            "Set either REDIS_URL (or CHANNEL_LAYER_URL) or PARLEY_REDIS_SENTINELS, not both."
        )
    _sentinel = {
        "sentinels": PARLEY_REDIS_SENTINELS,
        "master_name": PARLEY_REDIS_SENTINEL_MASTER,
        # A sentinel that does not answer is passed over for the next within seconds.
        "sentinel_kwargs": {"socket_connect_timeout": 2, "socket_timeout": 2},
        "db": PARLEY_REDIS_DB,
        "password": PARLEY_REDIS_PASSWORD or None,
        "socket_connect_timeout": 2,
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": env.str(
                "PARLEY_CHANNEL_LAYER_BACKEND",
                default="channels_redis.pubsub.RedisPubSubChannelLayer",
            ),
            # channels_redis asks the sentinels for the primary (its create_pool).
            "CONFIG": {"hosts": [_sentinel]},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "core.redis_clients.SentinelRedisCache",
            "LOCATION": ",".join(f"{host}:{port}" for host, port in PARLEY_REDIS_SENTINELS),
            "KEY_PREFIX": PARLEY_REDIS_PREFIX,
            "OPTIONS": {**_sentinel, "socket_timeout": 2},
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Single sign-on with OpenID Connect (accounts.sso, on mozilla-django-oidc), on when an issuer is
# set: its endpoints are found by discovery from the issuer when first needed (never at start),
# PKCE, state and nonce always on. PARLEY_OIDC_NAME names the provider on the login page's
# button; PARLEY_OIDC_SCOPES are the scopes asked for; PARLEY_OIDC_ROLES_CLAIM, if set, is the
# claim whose "<workspace slug>:<role>" entries give workspace memberships (accounts.sso_roles).
PARLEY_OIDC_ISSUER = env.str("PARLEY_OIDC_ISSUER", default="")
PARLEY_OIDC_CLIENT_ID = env.str("PARLEY_OIDC_CLIENT_ID", default="")
PARLEY_OIDC_CLIENT_SECRET = env.str("PARLEY_OIDC_CLIENT_SECRET", default="")
PARLEY_OIDC_NAME = env.str("PARLEY_OIDC_NAME", default="single sign-on")
PARLEY_OIDC_SCOPES = env.str("PARLEY_OIDC_SCOPES", default="openid email profile")
PARLEY_OIDC_ROLES_CLAIM = env.str("PARLEY_OIDC_ROLES_CLAIM", default="")
# Password sign-in (the site's and the admin's login forms); off, people sign in with SSO only
# (API tokens still work), which needs an issuer.
PARLEY_PASSWORD_LOGIN = env.bool("PARLEY_PASSWORD_LOGIN", default=True)
if PARLEY_OIDC_ISSUER and not (PARLEY_OIDC_CLIENT_ID and PARLEY_OIDC_CLIENT_SECRET):
    raise ImproperlyConfigured("PARLEY_OIDC_ISSUER needs PARLEY_OIDC_CLIENT_ID and _SECRET")
if not PARLEY_PASSWORD_LOGIN and not PARLEY_OIDC_ISSUER:
    raise ImproperlyConfigured("PARLEY_PASSWORD_LOGIN=0 needs single sign-on (PARLEY_OIDC_ISSUER)")
if "openid" not in PARLEY_OIDC_SCOPES.split():
    raise ImproperlyConfigured("PARLEY_OIDC_SCOPES must include openid")

# axes' backend first: it refuses a locked-out sign-in before any password is checked; then the
# password switch (refusing every password while PARLEY_PASSWORD_LOGIN=0), then single sign-on.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    *([] if PARLEY_PASSWORD_LOGIN else ["accounts.sso.PasswordLoginSwitch"]),
    "django.contrib.auth.backends.ModelBackend",
    *(["accounts.sso.ParleyOIDCBackend"] if PARLEY_OIDC_ISSUER else []),
]
# Login throttling (django-axes with core.lockout's handler): failed sign-ins on the login forms
# (the site's and the admin's) and wrong API tokens are counted in the database, so every process
# sees them. Past PARLEY_LOGIN_FAILURE_LIMIT failures as one account from one address, or
# PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT from one address whatever the account (wrong tokens count
# here), sign-ins are refused for PARLEY_LOGIN_COOLOFF_MINUTES after the failure that set the
# lock; a sign-in that succeeds forgets its account's failures from its address.
AXES_FAILURE_LIMIT = env.int("PARLEY_LOGIN_FAILURE_LIMIT", default=5)
PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT = env.int("PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT", default=20)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("PARLEY_LOGIN_COOLOFF_MINUTES", default=15.0))
if (
    min(AXES_FAILURE_LIMIT, PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT) < 1
    or AXES_COOLOFF_TIME <= timedelta()
):
    raise ValueError("PARLEY_LOGIN_*: the failure limits and the cool-off must be above 0")
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_HANDLER = "core.lockout.LockoutHandler"
# The address is the connection's peer (REMOTE_ADDR), never a header a client could write:
# behind a proxy, Daphne's --proxy-headers puts the proxy's X-Forwarded-For there.
AXES_CLIENT_IP_CALLABLE = "core.lockout.client_address"
AXES_LOCKOUT_CALLABLE = "core.lockout.lockout_page"
AXES_RESET_ON_SUCCESS = True
# What axes writes of a failed sign-in's query and form (AccessAttempt.get_data/post_data, and
# its failure log) never holds a secret: a password, an API token, the OIDC callback's code and
# state, or a signed link's k and u. (Replaces axes' default, whose two are kept.)
AXES_SENSITIVE_PARAMETERS = [
    "username",
    "ip_address",
    "password",
    "code",
    "state",
    "k",
    "u",
    "token",
]
# A sign-in tried while locked is refused unchecked and does not stretch the lock.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# The function every edge (REST, sockets, tails, MCP) asks which API key is a working token,
# under the locks above: key -> (user, token) or None. core imports no app, so it is named here.
PARLEY_TOKEN_LOOKUP = "accounts.tokens.user_and_token_for"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "templates" / "static"]
# Without collectstatic (tests, a first run) WhiteNoise serves straight from the finders.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

REST_FRAMEWORK = {
    # Token first: an unauthenticated REST client gets 401 with "WWW-Authenticate: Token".
    # People's API tokens (PARLEY_TOKEN_LOOKUP), under the login locks (a wrong, revoked or
    # expired key counts as a failed sign-in).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.lockout.TokenAuthentication",
        "core.lockout.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # drf-spectacular's, with each operation described by what its view says to clients.
    "DEFAULT_SCHEMA_CLASS": "core.openapi.ClientSchema",
    "EXCEPTION_HANDLER": "core.api.api_exception_handler",
    # Every request body passes the decoding gate (core.decoding); the API is JSON only.
    "DEFAULT_PARSER_CLASSES": ["core.decoding.GatedJSONParser"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Parley API",
    "DESCRIPTION": (
        "A team's conversations with an AI agent: start turns, steer or stop them, answer the "
        "questions an agent asks mid-turn, and tail any turn as Server-Sent Events."
    ),
    "VERSION": "1.0.0",
    # Paths are relative to where the schema is served (what OpenAPI assumes without servers;
    # said outright for the linters and generators that want it said).
    "SERVERS": [{"url": "/", "description": "This Parley"}],
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the sidecar package, served by WhiteNoise: nothing fetched from elsewhere
    # (no validator badge either), and its start-up script served as a file of its own (see
    # config/urls.py), so the page runs under the same policy as every other.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
    # One name for the choices every channel of a person's settings takes (off, addressed, all).
    "ENUM_NAME_OVERRIDES": {"NotificationReach": "reach.models.Reach"},
    # Then `nullable` only where OpenAPI 3.0 gives it a meaning (core/openapi.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.openapi.null_beside_type",
    ],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("PARLEY_LOG_LEVEL", default="INFO")},
    # httpx logs every request at INFO; the openai SDK logs requests (headers too) at DEBUG, and
    # slack_sdk its requests' bodies (answer links) and its replies' URLs.
    "loggers": {
        "daphne": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "openai": {"level": "WARNING"},
        "slack_sdk": {"level": "INFO"},
    },
}

# Parley itself.
PARLEY_FILES_ROOT = Path(env.str("PARLEY_FILES_ROOT", default=str(VAR_DIR / "files")))
# Agent backends by name, loaded by dotted path; PARLEY_AGENTS (a JSON object) adds or replaces.
# A model served over the OpenAI protocol (OpenAI, vLLM, Ollama, llama.cpp, a gateway): the
# agent named "openai" exists only once PARLEY_LLM_MODEL is set. The key is sent to that server
# and nowhere else (never to the page, the events or the logs).
PARLEY_LLM_BASE_URL = env.str("PARLEY_LLM_BASE_URL", default="https://api.openai.com/v1")
PARLEY_LLM_API_KEY = env.str("PARLEY_LLM_API_KEY", default="")
PARLEY_LLM_MODEL = env.str("PARLEY_LLM_MODEL", default="")
# Other models a conversation may pick when it is created (the default is always offered).
PARLEY_LLM_MODELS = env.list("PARLEY_LLM_MODELS", default=[])
# How long one model request may take, how often a 429 or 5xx is tried again, and how many
# model calls one turn may make.
PARLEY_LLM_TIMEOUT_SECONDS = env.float("PARLEY_LLM_TIMEOUT_SECONDS", default=120.0)
PARLEY_LLM_MAX_RETRIES = env.int("PARLEY_LLM_MAX_RETRIES", default=3)
PARLEY_LLM_MAX_STEPS = env.int("PARLEY_LLM_MAX_STEPS", default=25)
# The earlier turns given to the model, trimmed from the oldest to about this many tokens.
PARLEY_LLM_HISTORY_TOKENS = env.int("PARLEY_LLM_HISTORY_TOKENS", default=24_000)
# The most of a file the model reads at once.
PARLEY_LLM_READ_MAX_BYTES = env.int("PARLEY_LLM_READ_MAX_BYTES", default=64 * 1024)
PARLEY_AGENTS = {
    "builtin": "conversations.agents.builtin.BuiltinAgent",
    **({"openai": "conversations.agents.llm.OpenAIAgent"} if PARLEY_LLM_MODEL else {}),
    **env.json("PARLEY_AGENTS", default={}),
}
PARLEY_DEFAULT_AGENT = env.str("PARLEY_DEFAULT_AGENT", default="builtin")
# Agents that run single turns started from elsewhere, never a conversation's own (so never
# offered when one is created): an outside agent's turn, driven through MCP.
PARLEY_TURN_AGENTS = {"external": "external.agent.ExternalAgent"}
# The MCP endpoint (/mcp/): a session with no request in flight for this long ends, and its turn
# with it (a Streamable HTTP client can vanish without ending its session); a tool call waiting
# on people sends a progress notification this often (when the client asked for them), so that
# neither it nor a proxy gives up; a task's result is kept this long unless the client asks for
# less.
PARLEY_MCP_IDLE_TIMEOUT_SECONDS = env.float("PARLEY_MCP_IDLE_TIMEOUT_SECONDS", default=600.0)
PARLEY_MCP_PROGRESS_SECONDS = env.float("PARLEY_MCP_PROGRESS_SECONDS", default=15.0)
PARLEY_MCP_TASK_TTL_SECONDS = env.int("PARLEY_MCP_TASK_TTL_SECONDS", default=86400)
# Pause between the builtin agent's streamed chunks, so a person can read along.
PARLEY_BUILTIN_PACE_MS = env.int("PARLEY_BUILTIN_PACE_MS", default=25)
# Text deltas that arrive within this window are written as one event.
PARLEY_DELTA_COALESCE_MS = env.int("PARLEY_DELTA_COALESCE_MS", default=30)
# Events a turn may have waiting to be written before the agent is made to wait (backpressure).
PARLEY_EVENT_BACKLOG = env.int("PARLEY_EVENT_BACKLOG", default=2000)
# A turn's lease: renewed by its process every third of it; once it runs out another process
# (or this one, restarted) takes the turn over and resumes it from its journal. A process that
# is killed has its turns going on elsewhere within a lease and an upkeep interval (13.3 s).
PARLEY_TURN_LEASE_SECONDS = env.int("PARLEY_TURN_LEASE_SECONDS", default=10)
# A turn waiting this long for an answer leaves its process's memory; whoever settles the
# question resumes it (turns of agents that cannot be resumed stay in memory).
PARLEY_RELEASE_PARKED_AFTER_SECONDS = env.float("PARLEY_RELEASE_PARKED_AFTER_SECONDS", default=60.0)
# How long a turn's own writes keep trying while the database is away (a restart, a failover).
PARLEY_DB_RETRY_SECONDS = env.float("PARLEY_DB_RETRY_SECONDS", default=60.0)
PARLEY_MAX_INPUT_CHARS = env.int("PARLEY_MAX_INPUT_CHARS", default=20_000)
PARLEY_WS_MAX_FRAME_BYTES = env.int("PARLEY_WS_MAX_FRAME_BYTES", default=64 * 1024)
# A socket's (or a tail's) write buffer: past this many bytes not yet taken by the client,
# nothing more is written to it until the buffer has drained; a socket that stays full this many
# seconds is closed with 4408, a tail ended with a fell_behind error (the client reconnects and
# resumes from the last event it had).
PARLEY_SOCKET_BUFFER_BYTES = env.int("PARLEY_SOCKET_BUFFER_BYTES", default=256 * 1024)
PARLEY_SOCKET_STALL_SECONDS = env.float("PARLEY_SOCKET_STALL_SECONDS", default=15.0)
PARLEY_SSE_KEEPALIVE_SECONDS = env.float("PARLEY_SSE_KEEPALIVE_SECONDS", default=15.0)
# How long an EventSource waits before reconnecting after a cut (sent as `retry:` with a tail's
# first frame).
PARLEY_SSE_RETRY_SECONDS = env.float("PARLEY_SSE_RETRY_SECONDS", default=2.0)
# What one person may hold open at once, over every process (refused past it: a socket closed
# with 4429, a tail or an MCP session answered 429), and how often they may start turns, create
# conversations and have questions asked on their behalf ("N/s", "N/min", "N/hour", "N/day";
# empty: no limit). Past a rate the request is answered 429 with Retry-After.
PARLEY_MAX_SOCKETS_PER_PERSON = env.int("PARLEY_MAX_SOCKETS_PER_PERSON", default=50)
PARLEY_MAX_TAILS_PER_PERSON = env.int("PARLEY_MAX_TAILS_PER_PERSON", default=20)
PARLEY_MAX_MCP_SESSIONS_PER_PERSON = env.int("PARLEY_MAX_MCP_SESSIONS_PER_PERSON", default=10)


def _rate(name: str, default: str) -> str | None:
    """A rate as DRF's throttles read it ("30/min"), checked now; None for an empty one."""
    rate = env.str(name, default=default).strip()
    if rate and not re.fullmatch(r"[0-9]+/(s|sec|second|m|min|minute|h|hour|d|day)", rate):
        raise ImproperlyConfigured(f'{name}: {rate!r} is not a rate such as "30/min".')
    return rate or None


PARLEY_TURN_RATE = _rate("PARLEY_TURN_RATE", "60/min")
PARLEY_CONVERSATION_RATE = _rate("PARLEY_CONVERSATION_RATE", "30/min")
PARLEY_QUESTION_RATE = _rate("PARLEY_QUESTION_RATE", "30/min")
# People's own account (accounts.account_page, accounts.password_pages): password reset emails
# asked for one address (whether or not it has an account, so a refusal tells nothing), and from
# one client address; email changes one person may ask for (each sends a link to an address).
PARLEY_PASSWORD_RESET_RATE = _rate("PARLEY_PASSWORD_RESET_RATE", "3/hour")
PARLEY_PASSWORD_RESET_CLIENT_RATE = _rate("PARLEY_PASSWORD_RESET_CLIENT_RATE", "20/hour")
PARLEY_EMAIL_CHANGE_RATE = _rate("PARLEY_EMAIL_CHANGE_RATE", "5/hour")
# How long a live feed may sit idle before it checks the database for events it was not told of.
PARLEY_FEED_POLL_SECONDS = env.float("PARLEY_FEED_POLL_SECONDS", default=5.0)
# Questions agents ask mid-turn: how long they wait by default, how many a turn may ask, and
# how often parked turns re-read their questions (one query per process, whatever their number).
PARLEY_SELECTION_TIMEOUT_SECONDS = env.float("PARLEY_SELECTION_TIMEOUT_SECONDS", default=300.0)
PARLEY_MAX_QUESTIONS_PER_TURN = env.int("PARLEY_MAX_QUESTIONS_PER_TURN", default=10)
PARLEY_SELECTION_POLL_SECONDS = env.float("PARLEY_SELECTION_POLL_SECONDS", default=5.0)
# A question still waiting after this share of its time reminds its addressee (or, with none,
# the workspace's members); after this share it is escalated to the workspace's owners, if
# escalation is on for it (by default, or as its agent asked). 0 turns either off.
PARLEY_REMIND_AFTER = env.float("PARLEY_REMIND_AFTER", default=0.5)
PARLEY_ESCALATE_AFTER = env.float("PARLEY_ESCALATE_AFTER", default=0.8)
PARLEY_ESCALATE_QUESTIONS = env.bool("PARLEY_ESCALATE_QUESTIONS", default=False)
# Reaching people outside Parley (the reach app). Links in emails and Slack messages are built
# on PARLEY_PUBLIC_URL, the address people open Parley at (`make run` sets its own).
PARLEY_PUBLIC_URL = env.str("PARLEY_PUBLIC_URL", default="http://127.0.0.1:8000").rstrip("/")
# Email: off unless PARLEY_EMAIL_URL names an SMTP server (smtp://user:password@host:port,
# smtp+tls:// for STARTTLS, smtps:// for TLS), sent from PARLEY_EMAIL_FROM.
PARLEY_EMAIL_URL = env.str("PARLEY_EMAIL_URL", default="")
if PARLEY_EMAIL_URL:
    _email = env.email_url_config(PARLEY_EMAIL_URL)
    EMAIL_BACKEND = _email["EMAIL_BACKEND"]
    EMAIL_HOST, EMAIL_PORT = _email["EMAIL_HOST"], _email["EMAIL_PORT"]
    EMAIL_HOST_USER = _email["EMAIL_HOST_USER"] or ""
    EMAIL_HOST_PASSWORD = _email["EMAIL_HOST_PASSWORD"] or ""
    EMAIL_USE_TLS = _email.get("EMAIL_USE_TLS", False)
    EMAIL_USE_SSL = _email.get("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env.float("PARLEY_EMAIL_TIMEOUT_SECONDS", default=10.0)
DEFAULT_FROM_EMAIL = env.str("PARLEY_EMAIL_FROM", default="Parley <parley@localhost>")
# Slack: off unless a Slack app's bot token and signing secret are given; the Web API's address
# may be changed (the tests point it at a local server speaking its protocol).
PARLEY_SLACK_BOT_TOKEN = env.str("PARLEY_SLACK_BOT_TOKEN", default="")
PARLEY_SLACK_SIGNING_SECRET = env.str("PARLEY_SLACK_SIGNING_SECRET", default="")
PARLEY_SLACK_API_URL = env.str("PARLEY_SLACK_API_URL", default="https://slack.com/api/")
# The outbox: a delivery that fails is tried again after PARLEY_DELIVERY_BACKOFF_SECONDS, doubled
# each time (at most an hour), PARLEY_DELIVERY_ATTEMPTS times in all before it is failed for
# good; a process holds what it sends for PARLEY_DELIVERY_CLAIM_SECONDS (one that dies lets it
# go then). A webhook endpoint whose deliveries failed for good this many times in a row is
# disabled.
PARLEY_DELIVERY_ATTEMPTS = env.int("PARLEY_DELIVERY_ATTEMPTS", default=8)
PARLEY_DELIVERY_BACKOFF_SECONDS = env.float("PARLEY_DELIVERY_BACKOFF_SECONDS", default=10.0)
PARLEY_DELIVERY_CLAIM_SECONDS = env.float("PARLEY_DELIVERY_CLAIM_SECONDS", default=60.0)
# How often each process looks for deliveries due that nobody nudged it about (others' retries,
# quiet hours ending, a process that died mid-send).
PARLEY_DELIVERY_POLL_SECONDS = env.float("PARLEY_DELIVERY_POLL_SECONDS", default=2.0)
PARLEY_WEBHOOK_DISABLE_AFTER = env.int("PARLEY_WEBHOOK_DISABLE_AFTER", default=5)
# Webhooks go to public addresses only (see core.egress): set this to let them reach private,
# loopback and link-local ones (a receiver inside your own network).
PARLEY_WEBHOOK_PRIVATE_ADDRESSES = env.bool("PARLEY_WEBHOOK_PRIVATE_ADDRESSES", default=False)
# How long the link that confirms a new email address works, and a password reset link (Django's
# PASSWORD_RESET_TIMEOUT, in seconds).
PARLEY_EMAIL_CHANGE_HOURS = env.float("PARLEY_EMAIL_CHANGE_HOURS", default=24.0)
PASSWORD_RESET_TIMEOUT = round(3600 * env.float("PARLEY_PASSWORD_RESET_HOURS", default=2.0))
if PARLEY_EMAIL_CHANGE_HOURS <= 0 or PASSWORD_RESET_TIMEOUT <= 0:
    raise ImproperlyConfigured("PARLEY_EMAIL_CHANGE_HOURS, PARLEY_PASSWORD_RESET_HOURS: above 0")
# An answer link still shows its question's outcome this long after the question's expiry.
PARLEY_ANSWER_LINK_DAYS = env.float("PARLEY_ANSWER_LINK_DAYS", default=7.0)
# An invitation's link (sent by email) works once, for this many days.
PARLEY_INVITATION_DAYS = env.float("PARLEY_INVITATION_DAYS", default=7.0)
# /metrics, and what /readyz found (to others it says only ready or not), are the operator's:
# served with the scrape token (Authorization: Bearer <PARLEY_METRICS_TOKEN>; a wrong one counts
# toward the login locks of its address), or to a request straight from one of these addresses
# or networks (the connection's peer, and through no proxy: see core.health). Empty: token only.
PARLEY_METRICS_TOKEN = env.str("PARLEY_METRICS_TOKEN", default="")
PARLEY_METRICS_ALLOW = [
    ipaddress.ip_network(entry.strip(), strict=False)
    for entry in env.list("PARLEY_METRICS_ALLOW", default=["127.0.0.0/8", "::1"])
    if entry.strip()
]
# On SIGTERM a process reports itself not ready (/readyz answers 503) and goes on serving this
# long, so that the load balancer stops sending it work, before it stops; 0 stops at once.
PARLEY_SHUTDOWN_GRACE_SECONDS = env.float("PARLEY_SHUTDOWN_GRACE_SECONDS", default=5.0)
# How long the database or Redis may fail /readyz's checks before the process says it is not
# ready. They are shared: a restart or a failover fails every process's checks at once, and a
# balancer that took every process out for it would turn seconds of waiting (PgBouncer holds the
# queries; the database makes good what Redis lost) into an outage. Meanwhile /readyz answers 200
# "degraded", naming what fails. 0: not ready at the first failed check.
PARLEY_READY_TOLERANCE_SECONDS = env.float("PARLEY_READY_TOLERANCE_SECONDS", default=15.0)
