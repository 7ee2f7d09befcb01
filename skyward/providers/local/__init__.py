"""``sky.Local()``: a pool of agent processes on this machine (``provider``), the private Ray
instance they run on (``ray_instance``; the pool daemon's, which outlives it:
``detached_ray``), how a pool starts on it (``launch``), the Image environment of its
agents (``env``) and the reaper that cleans up after a killed client."""
