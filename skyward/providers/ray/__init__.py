"""``sky.Ray(address=...)``: a pool on a Ray cluster someone already runs (``provider``), how it
attaches (``attach``), and the agents on a Ray cluster this client drives, which local pools
use too (``agents``)."""
