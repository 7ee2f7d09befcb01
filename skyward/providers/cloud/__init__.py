"""What the machine clouds (RunPod, Vast.ai, Verda, DigitalOcean, Novita) share: the HTTP
client, credentials, the typed view of a cloud's machines, naming for ``sky gc``, and
the launch that turns a cloud's machines into a pool."""
