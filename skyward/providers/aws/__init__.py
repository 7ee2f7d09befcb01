"""``sky.AWS``: EC2 machines created for a pool and destroyed after it."""
