"""Kept pools (``Options(keep_alive=...)``, docs/kept-pools.md), the client's side: how a
script keeps or adopts a pool (``client``), what it sends the pool daemon (``request``),
and what a daemon writes down of its pools for a successor (``state``, read by the
client too, to start a successor). The daemon itself is ``skyward.daemon``."""
