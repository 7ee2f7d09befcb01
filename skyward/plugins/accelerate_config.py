"""``sky.plugins.accelerate``'s ``config``: its keys, checked, and the environment they imply.

Two spellings are taken. The keys of ``accelerate config``'s YAML (``distributed_type``,
``mixed_precision``, ``fsdp_config``, ``deepspeed_config``, ...), and the shorter form
of the original skyward: ``fsdp`` (a dict: turns FSDP on), ``deepspeed`` (a dict: turns
DeepSpeed on), ``mixed_precision`` and ``backend`` (the process group's backend). Inside
``fsdp``/``fsdp_config`` a key may carry the ``fsdp_`` prefix or not; inside
``deepspeed``/``deepspeed_config`` the ``deepspeed_`` prefix is optional. Each key maps to
the variable ``accelerate launch`` would set; a key nothing reads is refused, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping

from skyward.core.validation import check_choice, fail

FIELD = "plugins.accelerate"
SET_BY_SKYWARD = ("machine_rank", "main_process_ip", "main_process_port", "same_network", "rdzv_backend")
PLAIN = {
    "mixed_precision": "ACCELERATE_MIXED_PRECISION",
    "gradient_accumulation_steps": "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
    "use_cpu": "ACCELERATE_USE_CPU",
    "debug": "ACCELERATE_DEBUG_MODE",
}
FSDP = {
    key: f"FSDP_{key.upper()}"
    for key in (
        "sharding_strategy", "reshard_after_forward", "offload_params", "min_num_params", "auto_wrap_policy",
        "backward_prefetch", "state_dict_type", "forward_prefetch", "use_orig_params",
        "cpu_ram_efficient_loading", "sync_module_states", "activation_checkpointing",
        "activation_checkpointing_offload", "ignored_modules", "version",
    )
} | {"transformer_layer_cls_to_wrap": "FSDP_TRANSFORMER_CLS_TO_WRAP"}
DEEPSPEED = {
    key: f"ACCELERATE_DEEPSPEED_{key.upper()}"
    for key in (
        "zero_stage", "offload_optimizer_device", "offload_param_device", "offload_optimizer_nvme_path",
        "offload_param_nvme_path", "zero3_save_16bit_model", "moe_layer_cls_names",
    )
} | {
    "zero3_init_flag": "ACCELERATE_DEEPSPEED_ZERO3_INIT",
    "config_file": "ACCELERATE_DEEPSPEED_CONFIG_FILE",
    "gradient_accumulation_steps": "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
    "gradient_clipping": "ACCELERATE_GRADIENT_CLIPPING",
}
SECTIONS = {
    "fsdp": (FSDP, "fsdp_"), "fsdp_config": (FSDP, "fsdp_"),
    "deepspeed": (DEEPSPEED, "deepspeed_"), "deepspeed_config": (DEEPSPEED, "deepspeed_"),
}
DISTRIBUTED = {
    "NO": {}, "MULTI_CPU": {}, "MULTI_GPU": {},
    "FSDP": {"ACCELERATE_USE_FSDP": "true"}, "DEEPSPEED": {"ACCELERATE_USE_DEEPSPEED": "true"},
}
BACKENDS = ("gloo", "nccl")
KNOWN = (*PLAIN, *SECTIONS, "backend", "distributed_type", "num_processes", "num_machines", "compute_environment")


def check_config(config: Mapping[str, object]) -> None:
    """ValueError naming the first key of ``config`` that is refused, and why."""
    for key, value in config.items():
        if key in SET_BY_SKYWARD:
            raise fail(FIELD, f"config[{key!r}]", value, "skyward sets it for each node (the head is the main process); remove it")
        if key not in KNOWN:
            raise fail(FIELD, f"config[{key!r}]", value, f"supported keys are {', '.join(KNOWN)}")
        if key in SECTIONS:
            _check_section(key, value)
    if "backend" in config:
        check_choice(FIELD, "config['backend']", config["backend"], BACKENDS)
    kind = _distributed_type(config)
    if kind not in DISTRIBUTED:
        raise fail(FIELD, "config['distributed_type']", config["distributed_type"], f"use one of {', '.join(DISTRIBUTED)}")
    sections = [key for key in SECTIONS if key in config]
    if len(sections) > 1:
        raise fail(
            FIELD, f"config[{sections[1]!r}]", config[sections[1]],
            f"it conflicts with config[{sections[0]!r}]; give only one of {', '.join(sections)}",
        )
    if sections and kind not in ("NO", _turns_on(sections[0])):
        raise fail(
            FIELD, "config['distributed_type']", config["distributed_type"],
            f"config[{sections[0]!r}] turns on {_turns_on(sections[0])}; match it or leave it out",
        )


def config_env(config: Mapping[str, object]) -> dict[str, str]:
    """The environment ``accelerate launch`` derives from ``config`` (checked by ``check_config``)."""
    env: dict[str, str] = {}
    for key, variable in PLAIN.items():
        if key in config:
            env[variable] = _text(config[key])
    env.update(DISTRIBUTED[_distributed_type(config)])
    for section, (names, prefix) in SECTIONS.items():
        if section not in config:
            continue
        env.update(DISTRIBUTED[_turns_on(section)])
        entries = config[section]
        if not isinstance(entries, Mapping):  # check_config refused it already
            raise fail(FIELD, f"config[{section!r}]", entries, "use a dict of that section's keys")
        for key, value in dict(entries).items():
            env[names[key.removeprefix(prefix)]] = _text(value)
    return env


def _check_section(section: str, value: object) -> None:
    if not isinstance(value, Mapping):
        raise fail(FIELD, f"config[{section!r}]", value, "use a dict of that section's keys")
    names, prefix = SECTIONS[section]
    for key, item in value.items():
        if not isinstance(key, str) or key.removeprefix(prefix) not in names:
            raise fail(FIELD, f"config[{section!r}][{key!r}]", item, f"supported keys are {', '.join(names)}")


def _turns_on(section: str) -> str:
    return "FSDP" if SECTIONS[section][0] is FSDP else "DEEPSPEED"


def _distributed_type(config: Mapping[str, object]) -> str:
    return str(config.get("distributed_type", "NO")).upper()


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
