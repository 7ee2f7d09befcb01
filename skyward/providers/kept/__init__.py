"""Kept pools (``Options(keep_alive=...)``, docs/kept-pools.md): the client's side
(``client``), what it sends (``request``), and the pool daemon's side: the pools it
keeps (``daemon``), what it writes down of them for a successor (``state``), how it
serves a remote one (``session``), its log (``log``), its HTTP API (``http``,
``openapi``) and the scripts that API runs (``runs``)."""
