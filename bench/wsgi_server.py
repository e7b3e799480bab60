"""The web server of the API benchmark: one worker of a pre-forked pool, like ``gunicorn -w N --threads``.

Each worker is this script in its own process, listening on the shared port with SO_REUSEPORT (the kernel
spreads connections over the workers) and serving with Django's own threaded server and request handler (what
``manage.py runserver`` uses), minus the autoreloader and the per-request access log.

    python bench/wsgi_server.py PORT
"""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (sets Django up)
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler  # noqa: E402


class _SharedPortServer(ThreadedWSGIServer):
    allow_reuse_port = True


def main(port: int) -> None:
    logging.getLogger("django.server").setLevel(logging.WARNING)
    server = _SharedPortServer(("127.0.0.1", port), WSGIRequestHandler)
    server.set_app(common.wsgi_application())
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]))
