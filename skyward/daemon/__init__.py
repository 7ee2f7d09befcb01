"""The pool daemon (docs/kept-pools.md): a per-user process that keeps pools between
scripts, above the providers whose pools it keeps. ``process``: the process, its Unix
socket and its life; ``kept_pools``: the pools it keeps, local and remote, and their
relays; ``remote_backend``: how a remote kept pool's relay passes a script's calls to
the pool's head relay; ``pool_log``: each kept pool's log; ``http_api`` (with
``http_guard`` and ``openapi``): its HTTP API, and ``runs``: the scripts that API runs;
``dashboard_feed``: what its web dashboard (``observe.dashboard``) learns of a kept pool.
Its client is ``providers.daemon_client`` (and ``providers.kept``); it is started as
``python -m skyward.daemon DIR``."""
