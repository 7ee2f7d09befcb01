"""The live web dashboard (docs/dashboard.md): ``board`` folds a pool's events into what
the page shows (a ``PoolView`` of it, its latest events, each node's recent output,
throughput, a map's ETA, the cost so far) and summarises a large pool; ``app`` serves the
page, its assets (``static/``, in the wheel), a JSON snapshot and a server-sent event
stream, behind a one-time login link that sets a cookie (``app.Sessions``).

The pool daemon serves it for its kept pools (``daemon.http_api``, ``sky dashboard``);
a pool with ``Options(dashboard=True)`` serves it for itself (``api.dashboard``)."""
