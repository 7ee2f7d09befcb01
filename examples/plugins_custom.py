"""A custom plugin: every hook, and where it runs (see docs/plugins.md)."""

import contextlib
import os
from dataclasses import replace

import skyward as sky
from skyward.plugins import Plugin


@contextlib.contextmanager
def announce(info: sky.InstanceInfo):
    print(f"agent of node {info.node} starting")  # goes to the agent's log, not the client
    os.environ["GREETING"] = f"hello from node {info.node}"
    yield


@contextlib.contextmanager
def on_client(pool: sky.Pool, cluster):
    print(f"client: pool open on {len(cluster.nodes)} {cluster.provider} nodes")
    yield
    print("client: pool closing")


def shout(fn):
    def wrapped(*args, **kwargs):
        return str(fn(*args, **kwargs)).upper()

    return wrapped


greeter = (
    Plugin.create("greeter")
    .with_image_transform(lambda image, cluster: replace(image, env={**image.env, "PUNCT": "!"}))
    .with_bootstrap(lambda cluster: ("mkdir -p /tmp/greeter-cache",))
    .with_around_app(announce)
    .with_around_client(on_client)
    .with_decorator(shout)
)


@sky.function
def greet() -> str:
    return os.environ["GREETING"] + os.environ["PUNCT"]


def main() -> None:
    with sky.Compute(nodes=2, plugins=[greeter]) as pool:
        print(greet() @ pool)


if __name__ == "__main__":
    main()
