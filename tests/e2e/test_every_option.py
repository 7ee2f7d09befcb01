"""No option without an effect: every field of Spec, Nodes, Image, Worker and Options, on
every provider, is either honoured or refused when the pool is made or opened, with a
message naming it.

``VERDICTS`` is the table. A refusal is checked here (without connecting anywhere). An
effect is checked here on one local pool where that is cheap, and otherwise by the
named test (which must exist), because it needs hosts, a cloud or a killed client.
Adding a field without deciding its verdict on every provider fails
``test_every_field_has_a_verdict_on_every_provider``.
"""

from __future__ import annotations

import os
import platform
import re
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

import skyward as sky
from skyward.plugins import Plugin
from skyward.providers.base import with_default_storage

ROOT = Path(__file__).resolve().parents[2]
CLOUDS = ("runpod", "vastai", "verda", "digitalocean", "novita", "hyperstack", "tensordock", "vultr", "lambda", "gcp",
          "scaleway", "jarvislabs", "massedcompute")
PROVIDERS = ("local", "ssh", "ray", "aws", *CLOUDS)
QUIET = {"console": False, "logging": False}
MACHINE = {"aarch64": "arm64", "amd64": "x86_64"}.get(platform.machine().lower(), platform.machine().lower())
OTHER_MACHINE = "arm64" if MACHINE == "x86_64" else "x86_64"


def provider(name: str) -> Any:
    return {
        "local": sky.Local(),
        "ssh": sky.SSH(hosts=["10.255.255.1"]),
        "ray": sky.Ray(address="10.255.255.1:6379"),
        "aws": sky.AWS(),
        "runpod": sky.RunPod(), "vastai": sky.VastAI(), "verda": sky.Verda(), "digitalocean": sky.DigitalOcean(),
        "novita": sky.Novita(), "hyperstack": sky.Hyperstack(), "tensordock": sky.TensorDock(),
        "vultr": sky.Vultr(), "lambda": sky.Lambda(), "gcp": sky.GCP(),
        "scaleway": sky.Scaleway(), "jarvislabs": sky.JarvisLabs(), "massedcompute": sky.MassedCompute(),
    }[name]


@dataclass(frozen=True)
class Refused:
    """Setting the field to ``value`` is refused, naming the field."""

    value: Any


@dataclass(frozen=True)
class Here:
    """Honoured; the effect is checked by ``test_local_pool_honours_its_fields``."""


@dataclass(frozen=True)
class By:
    """Honoured; the effect is checked by the test ``node`` ("file.py::test_name")."""

    node: str


HERE = Here()
ENGINE = By("tests/e2e/test_every_option.py::test_local_pool_honours_its_fields")
REMOTE_OPTIONS = "tests/e2e/ssh/test_remote_options.py"
SSH_IMAGE = "tests/e2e/ssh/test_ssh_image.py::test_image_pip_env_includes_visible"
AWS_OFFERS = "tests/e2e/cloud/test_aws_offers.py"
AWS_POOL = "tests/e2e/cloud/test_aws_pool.py"
RAY_ATTACH = "tests/e2e/test_ray_attach.py"
ELASTIC = "tests/e2e/test_elastic.py"
AWS_ELASTIC = "tests/e2e/cloud/test_aws_elastic.py"
CLOUD_ELASTIC = "tests/e2e/cloud/test_cloud_elastic.py"
CONFORMANCE = "tests/e2e/cloud/test_conformance.py"
CLOUD_OFFERS = "tests/unit/test_cloud_client.py::test_offers_fit_the_spec_and_follow_the_allocation"
OLDER = "tests/e2e/test_older_reference.py"
PLUGIN_HOOKS = "tests/e2e/plugins/test_plugin_hooks.py"
LOCAL_IMAGE = "tests/e2e/plugins/test_local_image.py::test_image_pip_local_pool_imports_a_package_the_client_lacks"


def same(verdict: Any) -> dict[str, Any]:
    return {name: verdict for name in PROVIDERS}


VERDICTS: dict[str, dict[str, Any]] = {
    # Spec
    "Spec.provider": same(HERE),
    "Spec.accelerator": {
        "local": Refused(sky.accelerators.T4()), "ssh": Refused(sky.accelerators.T4()),
        "ray": Refused(sky.accelerators.T4()), "aws": By(f"{AWS_OFFERS}::test_a100_spot_offers_are_sorted_by_price"),
    },
    "Spec.nodes": {
        "local": HERE, "ssh": By(f"{REMOTE_OPTIONS}::test_ttl_zero_keeps_a_live_pool_and_closes_cleanly"),
        "ray": By(f"{RAY_ATTACH}::test_attach_dispatch_subset_and_cluster_survives"),
        "aws": By(f"{AWS_POOL}::test_a_three_node_pool_runs_and_leaves_nothing"),
    },
    "Spec.vcpus": {
        "local": HERE, "ssh": By(f"{REMOTE_OPTIONS}::test_hardware_the_hosts_lack_is_refused_at_open"),
        "ray": Refused(2), "aws": By(f"{AWS_OFFERS}::test_cpu_specs_get_no_gpu_machines"),
    },
    "Spec.memory_gb": {
        "local": HERE, "ssh": By(f"{REMOTE_OPTIONS}::test_hardware_the_hosts_lack_is_refused_at_open"),
        "ray": Refused(2.0), "aws": By(f"{AWS_OFFERS}::test_cpu_specs_get_no_gpu_machines"),
    },
    "Spec.disk_gb": {
        "local": HERE, "ssh": By(f"{REMOTE_OPTIONS}::test_hardware_the_hosts_lack_is_refused_at_open"),
        "ray": Refused(2), "aws": By(f"{AWS_POOL}::test_a_three_node_pool_runs_and_leaves_nothing"),
    },
    "Spec.architecture": {
        "local": HERE, "ssh": By(f"{REMOTE_OPTIONS}::test_hardware_the_hosts_lack_is_refused_at_open"),
        "ray": Refused("x86_64"), "aws": By(f"{AWS_OFFERS}::test_cpu_specs_get_no_gpu_machines"),
    },
    "Spec.allocation": {
        "local": HERE, "ssh": Refused("on-demand"), "ray": Refused("spot"),
        "aws": By(f"{AWS_OFFERS}::test_markets_follow_the_allocation"),
    },
    "Spec.image": same(HERE),
    "Spec.region": {
        "local": Refused("us-east-1"), "ssh": Refused("us-east-1"), "ray": Refused("us-east-1"),
        "aws": By(f"{AWS_POOL}::test_a_three_node_pool_runs_and_leaves_nothing"),
    },
    "Spec.max_hourly_cost": {
        "local": HERE, "ssh": Refused(1.0), "ray": Refused(1.0),
        "aws": By(f"{AWS_OFFERS}::test_a_price_cap_below_every_offer_names_the_cheapest"),
    },
    "Spec.ttl": {
        "local": Refused(60), "ssh": By(f"{REMOTE_OPTIONS}::test_killed_client_leaves_nothing_after_ttl"),
        "ray": Refused(60), "aws": By(f"{AWS_POOL}::test_a_killed_client_leaves_machines_that_shut_themselves_down"),
    },
    "Spec.volumes": {
        "local": By("tests/e2e/test_pool_volumes.py"), "ssh": By("tests/e2e/ssh/test_ssh_volumes.py"),
        "ray": Refused((sky.Volume("bucket", "/data", storage=sky.Storage("http://127.0.0.1:1")),)),
        "aws": By("tests/unit/test_pool_volumes.py"),
    },
    "Spec.plugins": {
        "local": By(f"{PLUGIN_HOOKS}::test_every_hook_fires_where_it_should"),
        "ssh": By("tests/e2e/ssh/test_ssh_plugins.py::test_plugins_on_remote_hosts"),
        "ray": Refused((Plugin.create("a plugin"),)),
        "aws": By("tests/e2e/ssh/test_ssh_plugins.py::test_plugins_on_remote_hosts"),
    },
    "Spec.instance_type": {
        "local": Refused("p5.48xlarge"), "ssh": Refused("p5.48xlarge"), "ray": Refused("p5.48xlarge"),
        "aws": By(f"{AWS_OFFERS}::test_a_pinned_instance_type_is_used_as_it_is"),
    },
    # Nodes
    "Nodes.desired": same(HERE),
    "Nodes.max": {
        "local": By(f"{ELASTIC}::test_autoscale_up_under_200_queued_tasks_and_back_down_when_idle"), "ssh": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
        "ray": By(f"{RAY_ATTACH}::test_an_elastic_pool_grows_and_shrinks_over_the_cluster_nodes"), "aws": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
    },
    "Nodes.min": {
        "local": By(f"{ELASTIC}::test_partial_readiness_starts_work_before_the_last_node_is_up"), "ssh": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
        "ray": By(f"{RAY_ATTACH}::test_an_elastic_pool_grows_and_shrinks_over_the_cluster_nodes"), "aws": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
    },
    # Image
    "Image.python": {"local": HERE, "ssh": By(SSH_IMAGE), "ray": HERE, "aws": By(SSH_IMAGE)},
    "Image.pip": {
        "local": By(LOCAL_IMAGE), "ssh": By(SSH_IMAGE), "ray": Refused(("numpy",)),
        "aws": By("tests/e2e/ssh/test_installed_client.py::test_installed_client_ships_itself_and_resolves_pip"),
    },
    "Image.pip_indexes": {
        "local": By(LOCAL_IMAGE), "ssh": By(SSH_IMAGE),
        "ray": Refused((sky.PipIndex("https://example.invalid/simple"),)), "aws": By(SSH_IMAGE),
    },
    "Image.pip_extra_index_url": {
        "local": By(f"{OLDER}::test_image_fields_and_methods_of_the_older_reference"), "ssh": By(f"{OLDER}::test_image_fields_and_methods_of_the_older_reference"),
        "ray": Refused("https://example.invalid/simple"),
        "aws": By(f"{OLDER}::test_image_fields_and_methods_of_the_older_reference"),
    },
    "Image.apt": {
        "local": Refused(("git",)), "ssh": By("tests/e2e/test_every_option.py::test_apt_becomes_an_install_step"),
        "ray": Refused(("git",)), "aws": By("tests/e2e/test_every_option.py::test_apt_becomes_an_install_step"),
    },
    "Image.env": {"local": HERE, "ssh": By(SSH_IMAGE), "ray": HERE, "aws": By(SSH_IMAGE)},
    "Image.shell_vars": {
        "local": By(LOCAL_IMAGE), "ssh": By(SSH_IMAGE), "ray": Refused({"X": "echo 1"}), "aws": By(SSH_IMAGE),
    },
    "Image.includes": {"local": HERE, "ssh": By(SSH_IMAGE), "ray": Refused(("tests",)), "aws": By(SSH_IMAGE)},
    "Image.excludes": {
        "local": Refused(("*.txt",)), "ssh": By("tests/e2e/test_every_option.py::test_excludes_leave_files_out"),
        "ray": Refused(("*.txt",)), "aws": By("tests/e2e/test_every_option.py::test_excludes_leave_files_out"),
    },
    "Image.skyward_source": same(Refused("pypi")),
    "Image.metrics": {
        "local": HERE, "ssh": By("tests/e2e/test_observe_metrics.py"), "ray": By(RAY_ATTACH),
        "aws": By("tests/e2e/test_observe_metrics.py"),
    },
    "Image.bootstrap_timeout": {
        "local": By("tests/e2e/plugins/test_local_image.py::test_local_bootstrap_timeout_stops_a_slow_plugin_op"),
        "ssh": By(f"{REMOTE_OPTIONS}::test_bootstrap_timeout_is_enforced_on_the_hosts"),
        "ray": Refused(30), "aws": By(f"{REMOTE_OPTIONS}::test_bootstrap_timeout_is_enforced_on_the_hosts"),
    },
    # Worker (the engine and the node agent: the same on every provider)
    "Worker.concurrency": same(By("tests/e2e/test_workers.py::test_concurrency_runs_tasks_side_by_side")),
    "Worker.buffer": same(By("tests/e2e/test_workers.py::test_buffer_accepts_more_tasks_than_slots")),
    "Worker.executor": same(By("tests/e2e/test_workers.py::test_process_executor_reuses_children")),
    "Worker.reuse_processes": same(By("tests/e2e/test_workers.py::test_process_executor_fresh_process_per_task")),
    # Options
    "Options.selection": same(By("tests/unit/test_allocation_selection.py::test_built_in_orders")),
    "Options.worker": same(ENGINE),
    "Options.provision_timeout": same(ENGINE),
    "Options.ssh_timeout": {
        "local": Refused(10), "ssh": By("tests/e2e/ssh/test_ssh_failures.py::test_unreachable_host_fails_within_the_ssh_timeout"),
        "ray": Refused(10), "aws": By(f"{AWS_POOL}::test_a_three_node_pool_runs_and_leaves_nothing"),
    },
    "Options.bootstrap_timeout": {
        "local": Refused(10), "ssh": By(f"{REMOTE_OPTIONS}::test_bootstrap_timeout_is_enforced_on_the_hosts"),
        "ray": Refused(10), "aws": By(f"{REMOTE_OPTIONS}::test_bootstrap_timeout_is_enforced_on_the_hosts"),
    },
    "Options.provision_retry_delay": same(By("tests/e2e/test_every_option.py::test_failed_launches_are_retried")),
    "Options.max_provision_attempts": same(By("tests/e2e/test_every_option.py::test_failed_launches_are_retried")),
    "Options.ssh_retry_interval": {
        "local": Refused(2), "ssh": By(f"{AWS_POOL}::test_a_three_node_pool_runs_and_leaves_nothing"),
        "ray": Refused(2), "aws": By(f"{AWS_POOL}::test_a_three_node_pool_runs_and_leaves_nothing"),
    },
    "Options.default_compute_timeout": same(By("tests/e2e/test_errors.py::test_pool_default_timeout_applies")),
    "Options.autoscale_cooldown": {
        "local": By(f"{ELASTIC}::test_autoscale_up_under_200_queued_tasks_and_back_down_when_idle"), "ssh": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
        "ray": By(f"{RAY_ATTACH}::test_an_elastic_pool_grows_and_shrinks_over_the_cluster_nodes"), "aws": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
    },
    "Options.autoscale_idle_timeout": {
        "local": By(f"{ELASTIC}::test_autoscale_up_under_200_queued_tasks_and_back_down_when_idle"), "ssh": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
        "ray": By(f"{RAY_ATTACH}::test_an_elastic_pool_grows_and_shrinks_over_the_cluster_nodes"), "aws": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
    },
    "Options.reconcile_tick_interval": {
        "local": By(f"{ELASTIC}::test_autoscale_up_under_200_queued_tasks_and_back_down_when_idle"), "ssh": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
        "ray": By(f"{RAY_ATTACH}::test_an_elastic_pool_grows_and_shrinks_over_the_cluster_nodes"), "aws": By(f"{AWS_ELASTIC}::test_partial_readiness_autoscaling_and_resize"),
    },
    "Options.shutdown_timeout": same(By("tests/e2e/test_lifecycle.py::test_exit_leaves_no_process_and_no_file")),
    "Options.console": same(By("tests/e2e/test_observe_console.py::test_minimal_console_prints_only_task_output")),
    "Options.logging": same(By("tests/e2e/test_observe_console.py::test_log_config_writes_events_and_task_output_to_its_file")),
    "Options.cluster": same(ENGINE),
    "Options.retry_on_interruption": {
        "local": By(f"{ELASTIC}::test_a_killed_agent_is_an_interruption_its_task_runs_again"),
        "ssh": By(f"{AWS_ELASTIC}::test_a_spot_interruption_during_a_map_loses_no_item"),
        "ray": By("tests/unit/test_elastic.py"),
        "aws": By(f"{AWS_ELASTIC}::test_a_spot_interruption_during_a_map_loses_no_item"),
    },
    "Options.health_checker": {
        "local": By(f"{ELASTIC}::test_a_node_failing_its_health_check_is_replaced"),
        "ssh": By(f"{AWS_ELASTIC}::test_a_node_failing_its_health_check_is_replaced"),
        "ray": By("tests/unit/test_elastic.py"),
        "aws": By(f"{AWS_ELASTIC}::test_a_node_failing_its_health_check_is_replaced"),
    },
    "Options.dashboard": same(By(
        "tests/e2e/test_dashboard_browser.py::test_options_dashboard_prints_a_link_that_serves_the_page_once_until_the_pool_closes"
    )),
    "Options.keep_alive": {
        "local": By("tests/e2e/test_kept_pools.py::test_a_script_run_again_adopts_the_same_nodes_without_ray_and_the_pool_ends_after_keep_alive"),
        "ssh": By("tests/e2e/ssh/test_kept_ssh.py::test_a_script_run_again_adopts_the_kept_ssh_pool_and_it_ends_after_keep_alive"),
        "ray": Refused(60.0),
        "aws": By("tests/e2e/cloud/test_kept_cloud.py::test_a_script_run_again_adopts_the_kept_cloud_pool_which_ends_after_keep_alive"),
    },
}


# The machine clouds share AWS's remote path (bootstrap, watchdog, options); where their
# verdict differs it is said here, the rest is AWS's.
CLOUD_VERDICTS: dict[str, Any] = {
    "Spec.accelerator": By(f"{CONFORMANCE}::test_offers_are_priced_and_sorted"),
    "Spec.nodes": By(f"{CONFORMANCE}::test_a_two_node_pool_runs_and_its_teardown_leaves_nothing"),
    "Spec.vcpus": By(CLOUD_OFFERS), "Spec.memory_gb": By(CLOUD_OFFERS), "Spec.architecture": By(CLOUD_OFFERS),
    "Spec.allocation": By(CLOUD_OFFERS), "Spec.max_hourly_cost": By(CLOUD_OFFERS),
    "Spec.disk_gb": By(f"{REMOTE_OPTIONS}::test_hardware_the_hosts_lack_is_refused_at_open"),
    "Spec.region": By(f"{CONFORMANCE}::test_offers_are_priced_and_sorted"),
    "Spec.volumes": By("tests/e2e/ssh/test_ssh_volumes.py"),
    "Spec.instance_type": Refused("p5.48xlarge"),
    "Options.ssh_retry_interval": By(f"{CONFORMANCE}::test_a_two_node_pool_runs_and_its_teardown_leaves_nothing"),
    # elastic pools: the clouds' own machines (CloudMachines); health checks share AWS's remote path
    "Nodes.max": By(f"{CLOUD_ELASTIC}::test_an_elastic_pool_grows_under_work_and_shrinks_when_idle"),
    "Nodes.min": By(f"{CLOUD_ELASTIC}::test_an_elastic_pool_grows_under_work_and_shrinks_when_idle"),
    "Options.autoscale_cooldown": By(f"{CLOUD_ELASTIC}::test_an_elastic_pool_grows_under_work_and_shrinks_when_idle"),
    "Options.autoscale_idle_timeout": By(f"{CLOUD_ELASTIC}::test_an_elastic_pool_grows_under_work_and_shrinks_when_idle"),
    "Options.reconcile_tick_interval": By(f"{CLOUD_ELASTIC}::test_an_elastic_pool_grows_under_work_and_shrinks_when_idle"),
    "Options.retry_on_interruption": By(f"{CLOUD_ELASTIC}::test_a_reclaimed_spot_machine_loses_no_item"),
}
for _name, _verdicts in VERDICTS.items():
    for _cloud in CLOUDS:
        _verdicts.setdefault(_cloud, CLOUD_VERDICTS.get(_name, _verdicts["aws"]))
VERDICTS["Spec.allocation"]["digitalocean"] = Refused("spot")
VERDICTS["Spec.allocation"]["tensordock"] = Refused("spot")
VERDICTS["Spec.allocation"]["vultr"] = Refused("spot")
VERDICTS["Spec.allocation"]["lambda"] = Refused("spot")
VERDICTS["Spec.allocation"]["scaleway"] = Refused("spot")
VERDICTS["Spec.allocation"]["massedcompute"] = Refused("spot")


def test_every_field_has_a_verdict_on_every_provider() -> None:
    wanted = {f"{cls.__name__}.{f.name}" for cls in (sky.Spec, sky.Nodes, sky.Image, sky.Worker, sky.Options) for f in fields(cls)}
    assert set(VERDICTS) == wanted, f"missing: {sorted(wanted - set(VERDICTS))}, stale: {sorted(set(VERDICTS) - wanted)}"
    for name, verdicts in VERDICTS.items():
        assert set(verdicts) == set(PROVIDERS), name


def test_every_named_test_exists() -> None:
    for verdicts in VERDICTS.values():
        for verdict in verdicts.values():
            if isinstance(verdict, By):
                path, _, test = verdict.node.partition("::")
                text = (ROOT / path).read_text()
                assert not test or re.search(rf"^def {re.escape(test)}\(", text, re.M), verdict.node


REFUSALS = [
    (name, where, verdict.value)
    for name, verdicts in VERDICTS.items()
    for where, verdict in verdicts.items()
    if isinstance(verdict, Refused)
]


@pytest.mark.parametrize(("name", "where", "value"), REFUSALS, ids=[f"{w}-{n}" for n, w, _ in REFUSALS])
def test_refused_fields_are_refused_naming_them(name: str, where: str, value: Any) -> None:
    owner, field = name.split(".")
    with pytest.raises((ValueError, NotImplementedError, TypeError)) as refused:
        spec, options = _with(owner, field, value, provider(where))
        pool = sky.Pool((spec,), options)  # the engine's checks
        spec = with_default_storage(spec)
        spec.provider.validate(spec, pool.options)  # the provider's
    message = str(refused.value)
    assert field in message, f"{where}: {name}={value!r} refused without naming it: {message}"


@pytest.mark.parametrize("where", ["local", "ssh", "ray", "digitalocean", "vultr"])
def test_a_spot_share_is_refused_where_it_cannot_be_met(where: str) -> None:
    spec = sky.Spec(provider=provider(where), allocation=0.8)
    with pytest.raises(ValueError, match=r"Spec\.allocation=0\.8 is not valid: .*(use|remove)"):
        spec.provider.validate(with_default_storage(spec), sky.Pool((spec,), sky.Options(**QUIET)).options)


def _with(owner: str, field: str, value: Any, where: Any) -> tuple[sky.Spec, sky.Options]:
    spec_fields: dict[str, Any] = {}
    options = sky.Options(**QUIET)
    if owner == "Spec":
        spec_fields[field] = value
    elif owner == "Nodes":
        spec_fields["nodes"] = sky.Nodes(desired=4, **{field: value})
    elif owner == "Image":
        spec_fields["image"] = sky.Image(**{field: value})
    elif owner == "Options":
        options = sky.Options(**QUIET, **{field: value})
    return sky.Spec(provider=where, **spec_fields), options


@sky.function
def node_facts() -> dict[str, Any]:
    info = sky.instance_info()
    import importlib

    return {
        "node": info.node if info else None, "env": os.environ.get("SKY_EVERY_OPTION"),
        "included": importlib.import_module("helpers.usermod").__name__ == "helpers.usermod",
    }


@sky.function
def uses_collections() -> str:
    try:
        sky.counter("x")
    except RuntimeError as exc:
        return str(exc)
    return "allowed"


def test_local_pool_honours_its_fields(tmp_path: Path) -> None:
    """One local pool with a non-default value for each locally honoured field, and the
    effect of each."""
    provisioned: list[sky.InstanceProvisioned] = []
    metrics: list[sky.Metric] = []
    image = sky.Image(python="auto", env={"SKY_EVERY_OPTION": "yes"}, includes=[str(ROOT / "tests" / "helpers")], metrics=None)
    options = sky.Options(
        **QUIET, worker=sky.Worker(concurrency=2), provision_timeout=120, cluster=False,
    )
    pool = sky.Compute(
        provider=sky.Local(), nodes=2, vcpus=1, memory_gb=0.5, disk_gb=1, architecture=MACHINE,
        allocation="on-demand", max_hourly_cost=0.5, image=image, options=options,
    )
    pool.on(sky.InstanceProvisioned, provisioned.append)
    pool.on(sky.Metric, metrics.append)
    with pool:
        facts = node_facts() @ pool
        assert [f["node"] for f in facts] == [0, 1]  # Spec.nodes, Nodes.desired
        assert all(f["env"] == "yes" and f["included"] for f in facts)  # Image.env, Image.includes
        assert "cluster=False" in uses_collections() >> pool  # Options.cluster
        time.sleep(1.5)
    assert not metrics  # Image.metrics=None
    assert {e.spot for e in provisioned} == {False} and len(provisioned) == 2  # Spec.allocation
    for field, value in (("vcpus", 10_000), ("memory_gb", 1e7), ("disk_gb", 10**9), ("architecture", OTHER_MACHINE)):
        with pytest.raises(ValueError, match=f"Spec.{field}="):  # checked against this machine
            sky.Local().validate(sky.Spec(provider=sky.Local(), **{field: value}), sky.Options())


def test_apt_becomes_an_install_step() -> None:
    """Image.apt on remote nodes: the bootstrap installs the packages (with sudo when not root)."""
    from skyward.image.script import Artifacts, render

    script = render(sky.Image(apt=["git", "ffmpeg"]), Artifacts("skyward.whl", "k", None, ""), "/tmp/p", 60)
    assert "install_apt git ffmpeg" in script and "apt-get install" in script and "sudo -n" in script


def test_excludes_leave_files_out(tmp_path: Path) -> None:
    """Image.excludes: matching files are left out of the includes shipped to nodes."""
    import io
    import tarfile

    from skyward.providers.ssh import includes

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "keep.py").write_text("X = 1\n")
    (package / "drop.txt").write_text("no\n")
    archive = includes.archive(sky.Image(includes=[str(package)], excludes=["*.txt"]))
    assert archive is not None
    names = tarfile.open(fileobj=io.BytesIO(archive[0])).getnames()
    assert names == ["pkg/keep.py"]


@dataclass(frozen=True)
class Flaky:
    """A provider whose first launches fail for a reason that may pass."""

    attempts: list[float]
    name = "flaky"
    priced = False
    options_used: frozenset[str] = frozenset()

    def validate(self, spec: sky.Spec, options: sky.Options) -> None:
        pass

    def offers(self, spec: sky.Spec) -> list[Any]:
        return []

    def default_storage(self, spec: sky.Spec) -> None:
        return None

    def launch(self, spec: sky.Spec, options: sky.Options, pool_id: str) -> Any:
        self.attempts.append(time.monotonic())
        if len(self.attempts) < 3:
            raise ConnectionError("no capacity right now")
        return sky.Local().launch(spec, options, pool_id)


def test_failed_launches_are_retried() -> None:
    """Options.max_provision_attempts and provision_retry_delay: a launch that failed for
    a reason that may pass is tried again after the delay, up to the attempts."""
    attempts: list[float] = []
    options = sky.Options(**QUIET, max_provision_attempts=3, provision_retry_delay=0.3)
    with sky.Compute(provider=Flaky(attempts), options=options) as pool:
        assert node_facts() >> pool
    assert len(attempts) == 3 and all(b - a >= 0.3 for a, b in zip(attempts, attempts[1:]))
    attempts.clear()
    with pytest.raises(ConnectionError) as failed:
        sky.Compute(provider=Flaky(attempts), options=sky.Options(**QUIET, max_provision_attempts=2)).__enter__()
    assert len(attempts) == 2 and any("max_provision_attempts" in note for note in failed.value.__notes__)
