"""JarvisLabs: GPU containers and VMs through the REST API of its jl CLI."""
