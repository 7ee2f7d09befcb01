"""The accelerator catalog: factories, MIG, the older aliases, helpers, parsing, matching."""

from __future__ import annotations

import importlib.util
import typing
from pathlib import Path

import pytest

import skyward as sky
from skyward.api.config_file import load_named_pool
from skyward.core import instance
from skyward.core.accelerator_catalog import BY_NAME, CATALOG, SPELLINGS, identify
from skyward.core.accelerators import FACTORIES, matches, parse_accelerator

acc = sky.accelerators


# ---------------------------------------------------------------- factories and data


@pytest.mark.parametrize("model", CATALOG, ids=lambda m: m.name)
def test_every_factory_builds_with_its_defaults(model) -> None:
    made = getattr(acc, model.name)()
    assert (made.name, made.count, made.memory) == (model.name, 1, model.memories[0])
    assert made.manufacturer == model.manufacturer and made.model is model
    assert (made.form_factor, made.mig, made.workers_per_node) == (None, None, 1)
    assert getattr(acc, model.name)(count=0.5).count == 0.5


def test_catalog_covers_the_reference_names() -> None:
    wanted = {
        "B200", "B100", "GB200", "GH200", "H200", "H100", "H20", "H800", "A100", "A800", "A40",
        "A30", "A16", "A10", "A10G", "A2", "L40S", "L40", "L4", "L20", "T4", "V100", "P100", "P4",
        "K80", "M60", "RTX_A6000", "RTX_A5000", "RTX_A4000", "RTX_6000_Ada", "RTX_5090",
        "RTX_4090", "RTX_4080", "RTX_3090", "RTX_3080", "MI300X", "MI300A", "MI325X", "MI250X",
        "MI250", "MI210", "MI100", "Trainium1", "Trainium2", "Inferentia1", "Inferentia2",
        "TPUv2", "TPUv3", "TPUv4", "TPUv5e", "TPUv5p", "TPUv6e",
    }
    assert wanted <= set(BY_NAME) == set(FACTORIES)
    assert {m.kind for m in CATALOG} == {"GPU", "TPU", "Trainium", "Inferentia", "Gaudi"}


def test_catalog_data_is_consistent() -> None:
    for model in CATALOG:
        assert model.variants, model.name
        assert len(set(model.memories)) == len(model.variants), model.name
        for variant in model.variants:
            for profile in variant.mig:
                assert 1 <= profile.workers_per_gpu <= 7
                assert profile.memory_gb <= variant.memory_gb, (model.name, profile.name)
            if variant.mig:  # the whole-GPU profile is the variant's own memory, within 10%
                largest = max(p.memory_gb for p in variant.mig)
                assert abs(largest - variant.memory_gb) <= 0.1 * variant.memory_gb, model.name
    assert len(SPELLINGS) >= len(CATALOG)


def test_memory_and_form_factor_variants() -> None:
    assert acc.A100(memory="40GB").memory_gb == 40.0
    assert acc.A100(memory="40gb").memory == "40GB"
    assert acc.H100(form_factor="NVL").memory == "94GB"  # NVL only comes with 94GB
    assert acc.H100(form_factor="pcie").form_factor == "PCIe"
    assert acc.H100(memory="94GB", form_factor="SXM").memory == "94GB"
    assert acc.V100(memory="32GB", form_factor="SXM").memory_gb == 32.0
    assert acc.L4(memory="24GB").memory == "24GB"  # the one size may be said explicitly


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: acc.A100(memory="12GB"), "A100.memory='12GB' is not valid: A100 comes with 80GB, 40GB"),
        (lambda: acc.A100(memory="lots"), "A100.memory='lots'"),
        (lambda: acc.H100(form_factor="OAM"), "H100.form_factor='OAM' is not valid: use one of SXM, PCIe, NVL"),
        (lambda: acc.T4(form_factor="SXM"), "T4.form_factor='SXM' is not valid: T4 comes in one form factor"),
        (lambda: acc.H800(memory="94GB", form_factor="SXM"), "H800.form_factor='SXM' is not valid: H800 94GB comes as NVL"),
        (lambda: acc.A100(form_factor="NVL"), "A100.form_factor='NVL' is not valid: use one of SXM, PCIe"),
        (lambda: acc.H100(mig="3g.20gb"), "H100.mig='3g.20gb' is not valid: H100 80GB takes 1g.10gb, 1g.20gb"),
        (lambda: acc.A100(memory="40GB", mig="3g.40gb"), "A100.mig='3g.40gb' is not valid: A100 40GB takes 1g.5gb"),
        (lambda: acc.T4(mig="1g.5gb"), "T4.mig='1g.5gb' is not valid: T4 does not support MIG (MIG-capable: "),
        (lambda: acc.H100(mig="3g.40gb", count=1.5), "H100.count=1.5 is not valid"),
        (lambda: acc.H100(count=0), "H100.count=0 is not valid"),
        (lambda: acc.H100(count="8"), "H100.count='8' is not valid"),
        (lambda: sky.Accelerator("A100", "48GB"), "A100.memory='48GB'"),
        (lambda: sky.Accelerator("", "48GB"), "Accelerator.name=''"),
    ],
)
def test_bad_values_name_field_value_and_what_is_allowed(build, expected: str) -> None:
    with pytest.raises(ValueError) as error:
        build()
    assert expected in str(error.value)


def test_custom_accelerators_stay_outside_the_catalog() -> None:
    custom = acc.Custom("My-GPU", memory="48GB", count=2)
    assert (custom.name, custom.memory_gb, custom.count, custom.model) == ("My-GPU", 48.0, 2, None)
    assert acc.Custom("A100", memory="12GB").model is None  # not checked against the catalog


def test_factories_are_introspectable() -> None:
    assert acc.H100.__name__ == "H100"
    assert "94GB" in acc.H100.__doc__ and "3g.40gb" in acc.H100.__doc__
    with pytest.raises(TypeError):
        acc.H100(8)  # keyword-only


# ---------------------------------------------------------------- MIG


@pytest.mark.parametrize(
    ("build", "table"),
    [
        (lambda m: acc.A100(memory="40GB", mig=m),
         {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}),
        (lambda m: acc.A100(mig=m),
         {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}),
        (lambda m: acc.H100(mig=m),
         {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}),
        (lambda m: acc.H100(memory="94GB", mig=m),
         {"1g.12gb": 7, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1}),
        (lambda m: acc.H200(mig=m),
         {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1}),
        (lambda m: acc.A30(mig=m), {"1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1}),
        (lambda m: acc.B200(mig=m),
         {"1g.23gb": 7, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1}),
        (lambda m: acc.GB200(mig=m),
         {"1g.23gb": 7, "1g.47gb": 4, "2g.47gb": 3, "3g.93gb": 2, "4g.93gb": 1, "7g.186gb": 1}),
        (lambda m: acc.GH200(mig=m),
         {"1g.12gb": 7, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1}),
        (lambda m: acc.GH200(memory="144GB", mig=m),
         {"1g.18gb": 7, "1g.36gb": 4, "2g.36gb": 3, "3g.72gb": 2, "4g.72gb": 1, "7g.144gb": 1}),
    ],
)
def test_mig_workers_per_gpu(build, table: dict[str, int]) -> None:
    for profile, workers in table.items():
        made = build(profile)
        assert (made.mig, made.workers_per_gpu, made.workers_per_node) == (profile, workers, workers)
        assert made.mig_profile.memory_gb == int(profile.split(".")[1].removesuffix("gb"))


def test_mig_workers_per_node_scale_with_count() -> None:
    assert acc.H100(count=8, mig="3g.40gb").workers_per_node == 16
    assert acc.A100(count=4, memory="40GB", mig="1g.5gb").workers_per_node == 28
    assert acc.H100(count=8).workers_per_node == 1  # without MIG one worker drives every GPU
    assert acc.H100(count=8).workers_per_gpu == 1


# ---------------------------------------------------------------- the older names


def test_accelerator_spec_namespaces() -> None:
    spec = sky.AcceleratorSpec
    assert spec.NVIDIA.H100() == acc.H100()
    assert spec.NVIDIA.H100(count=4, memory="94GB", mig="3g.47gb").workers_per_node == 8
    assert spec.NVIDIA.A100(memory="40GB") == acc.A100(memory="40GB")
    assert spec.NVIDIA.T4().name == "T4" and not hasattr(spec.NVIDIA, "MI300X")
    assert spec.AWS.Trainium(version=2) == acc.Trainium2()
    assert spec.AWS.Trainium(version=1, count=16).name == "Trainium1"
    assert spec.AWS.Inferentia(version=2) == acc.Inferentia2()
    assert spec.Google.TPU(version="v5p") == acc.TPUv5p()
    assert spec.Google.TPU(version="V6E", count=8).count == 8
    assert spec.Google.TPUSlice("v5p-8") == acc.TPUSlice("v5p-8")
    assert spec.AMD.MI("300X") == acc.MI300X()
    with pytest.raises(ValueError, match=r"AWS.Trainium.version=7 is not valid: use one of '1', '2', '3'"):
        spec.AWS.Trainium(version=7)
    with pytest.raises(ValueError, match=r"AMD.MI.version='999X'"):
        spec.AMD.MI("999X")


def test_tpu_slices_count_chips() -> None:
    assert acc.TPUSlice("v5p-8").count == 4  # v5p slices count TensorCores, two per chip
    assert acc.TPUSlice("v3-32").count == 16
    assert acc.TPUSlice("v5litepod-8").count == 8 and acc.TPUSlice("v5e-8").tpu_slice == "v5litepod-8"
    assert acc.TPUSlice("v6e-16").count == 16
    assert acc.TPUSlice("TPU-v5p-8").tpu_slice == "v5p-8"
    with pytest.raises(ValueError, match=r"TPUSlice.name='v5p'"):
        acc.TPUSlice("v5p")
    with pytest.raises(ValueError, match=r"TPUSlice.name='H100-8'"):
        acc.TPUSlice("H100-8")


def test_nvidia_literal_lists_every_nvidia_name_and_variant() -> None:
    values = typing.get_args(sky.NVIDIA)
    expected: list[str] = []
    for model in CATALOG:
        if model.manufacturer == "NVIDIA":
            expected.append(model.name)
            if len(model.memories) > 1:
                expected += [f"{model.name}-{memory}" for memory in model.memories]
            expected += [f"{model.name}-{form}" for form in model.form_factors]
    assert list(values) == expected
    assert {"A100-40GB", "A100-80GB", "H100-80GB", "H100-SXM", "H100-PCIe", "H100-NVL", "GB200"} <= set(values)
    for value in values:
        parsed = parse_accelerator(value)
        assert sky.is_nvidia(parsed) and parsed.name == value.split("-")[0]


def test_is_nvidia_and_is_trainium() -> None:
    assert sky.is_nvidia("H100") and sky.is_nvidia("Tesla T4") and sky.is_nvidia(acc.RTX_4090())
    assert sky.is_nvidia("NVIDIA RTX PRO 4500 Blackwell")  # not in the catalog, says NVIDIA
    assert not sky.is_nvidia("MI300X") and not sky.is_nvidia("Trainium2") and not sky.is_nvidia("v5p-8")
    assert not sky.is_nvidia("something else") and not sky.is_nvidia(acc.Custom("Tesla X"))
    assert sky.is_trainium("Trainium2") and sky.is_trainium("trn1") and sky.is_trainium(acc.Trainium3())
    assert not sky.is_trainium("H100") and not sky.is_trainium("Inferentia2")
    assert acc.Trainium2().is_trainium and not acc.H100().is_trainium


def _info(accelerator: sky.AcceleratorInfo | None) -> sky.InstanceInfo:
    return sky.InstanceInfo(
        node=0, worker=0, total_nodes=1, workers_per_node=1, accelerators=8.0,
        total_accelerators=8.0, head_addr="10.0.0.1", head_port=6379, job_id="job",
        accelerator=accelerator,
    )


def test_current_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instance, "_node_info", None)
    assert sky.current_accelerator() is None  # outside a task
    monkeypatch.setattr(instance, "_node_info", _info(sky.AcceleratorInfo("NVIDIA A100-SXM4-80GB", 8.0, 80.0)))
    assert sky.current_accelerator() == "A100"
    monkeypatch.setattr(instance, "_node_info", _info(sky.AcceleratorInfo("Trainium2", 16.0, None, True)))
    assert sky.current_accelerator() == "Trainium2"
    monkeypatch.setattr(instance, "_node_info", _info(sky.AcceleratorInfo("GPU", 1.0)))
    assert sky.current_accelerator() is None  # not a catalog name
    monkeypatch.setattr(instance, "_node_info", _info(None))
    assert sky.current_accelerator() is None  # a CPU node


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "name", "memory", "count", "form"),
    [
        ("A100", "A100", "80GB", 1, None),
        ("a100", "A100", "80GB", 1, None),
        ("A100-40GB", "A100", "40GB", 1, None),
        ("a100-40g", "A100", "40GB", 1, None),
        ("H100:8", "H100", "80GB", 8, None),
        ("8xH100", "H100", "80GB", 8, None),
        ("8 x h100", "H100", "80GB", 8, None),
        ("H100-SXM", "H100", "80GB", 1, "SXM"),
        ("H100-NVL", "H100", "94GB", 1, "NVL"),
        ("h100-pcie:2", "H100", "80GB", 2, "PCIe"),
        ("A100:0.5", "A100", "80GB", 0.5, None),
        ("A100-40GB-PCIe:4", "A100", "40GB", 4, "PCIe"),
        ("NVIDIA A100-SXM4-40GB", "A100", "40GB", 1, "SXM"),
        ("rtx 4090", "RTX_4090", "24GB", 1, None),
        ("RTX_A6000:2", "RTX_A6000", "48GB", 2, None),
        ("mi300x:8", "MI300X", "192GB", 8, None),
        ("trn2:16", "Trainium2", "96GB", 16, None),
        ("Inferentia2", "Inferentia2", "32GB", 1, None),
        ("tpuv5e:4", "TPUv5e", "16GB", 4, None),
        ("v5p-8", "TPUv5p", "95GB", 4, None),
    ],
)
def test_parse_accelerator(text: str, name: str, memory: str, count: float, form: str | None) -> None:
    parsed = parse_accelerator(text)
    assert (parsed.name, parsed.memory, parsed.count, parsed.form_factor) == (name, memory, count, form)
    assert sky.parse_accelerator is parse_accelerator


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("H1000", "accelerator 'H1000' is not in the catalog: did you mean H100"),
        ("RTX 4099", "did you mean RTX_4090"),
        ("A100-48GB", "A100.memory='48GB' is not valid: A100 comes with 80GB, 40GB"),
        ("T4-SXM", "T4.form_factor='SXM' is not valid"),
        ("A100:0", "A100.count=0 is not valid"),
        ("zzz", "known names include A100"),
        ("", "accelerator.name=''"),
    ],
)
def test_parse_accelerator_rejects_unknown_strings(text: str, expected: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_accelerator(text)
    assert expected in str(error.value)
    if "not in the catalog" in str(error.value):
        assert "sky.accelerators.Custom" in str(error.value)


def test_older_compute_pool_and_skyward_toml_parse_strings(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = sky.ComputePool(accelerator="H100:8")
    assert pool.specs[0].accelerator == acc.H100(count=8)
    assert sky.ComputePool(accelerator="A100-40GB").specs[0].accelerator == acc.A100(memory="40GB")
    with pytest.raises(ValueError, match="did you mean A100"):
        sky.ComputePool(accelerator="A1000")
    config = tmp_path / "skyward.toml"
    config.write_text(
        '[pools.gpu]\naccelerator = "a100-40gb:2"\n'
        '[pools.bad]\naccelerator = "B2000"\n'
        '[pools.table]\naccelerator = { name = "A100" }\n'
    )
    monkeypatch.setenv("SKYWARD_CONFIG", str(config))
    assert load_named_pool("gpu")[0].accelerator == acc.A100(memory="40GB", count=2)
    with pytest.raises(ValueError, match="did you mean B200"):
        load_named_pool("bad")
    with pytest.raises(ValueError, match="use a string such as"):
        load_named_pool("table")


# ---------------------------------------------------------------- matching machines


@pytest.mark.parametrize(
    ("spelling", "name", "memory", "form"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100", 80, "SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100", 40, "PCIe"),
        ("Tesla T4", "T4", None, None),
        ("A10G", "A10G", None, None),
        ("NVIDIA A10G", "A10G", None, None),
        ("H100 80GB HBM3", "H100", 80, None),
        ("NVIDIA H100 NVL", "H100", None, "NVL"),
        ("Tesla V100-SXM2-32GB", "V100", 32, "SXM"),
        ("NVIDIA GeForce RTX 4070 Ti", "RTX_4070_Ti", None, None),
        ("NVIDIA RTX A6000", "RTX_A6000", None, None),
        ("NVIDIA RTX 6000 Ada Generation", "RTX_6000_Ada", None, None),
        ("AMD Instinct MI300X", "MI300X", None, None),
        ("AMD Radeon Pro V520", "Radeon_Pro_V520", None, None),
        ("Gaudi HL-205", "Gaudi", None, None),
        ("T4g", "T4G", None, None),
        ("Trainium", "Trainium1", None, None),
        ("inf2", "Inferentia2", None, None),
    ],
)
def test_identify_vendor_spellings(spelling: str, name: str, memory: float | None, form: str | None) -> None:
    seen = identify(spelling)
    assert seen is not None
    assert (seen.model.name, seen.memory_gb, seen.form_factor) == (name, memory, form)


def test_matches_aws_style_reports() -> None:
    mib = 1 / 1024
    assert matches(acc.A100(memory="40GB", count=8), "A100", 40960 * mib, 8)  # p4d.24xlarge
    assert not matches(acc.A100(count=8), "A100", 40960 * mib, 8)  # A100() is the 80GB card
    assert matches(acc.A100(count=8), "A100", 81920 * mib, 8)  # p4de.24xlarge
    assert matches(acc.A10G(), "A10G", 22.5, 1)  # reported a little under the listed 24GB
    assert matches(acc.L4(), "L4", 22888 * mib, 1)
    assert matches(acc.T4(), "Tesla T4", 15.0)
    assert matches(acc.H100(count=8), "NVIDIA H100 80GB HBM3", None, 8)
    assert matches(acc.Trainium2(count=16), "Trainium2", 96, 16)
    assert matches(acc.MI300X(), "AMD Instinct MI300X", 192, 8)


def test_matches_checks_model_count_memory_and_form_factor() -> None:
    assert not matches(acc.A100(), "A10", 24, 1)
    assert not matches(acc.A10(), "A10G", 24, 1)
    assert not matches(acc.H100(count=8), "H100", 80, 4)  # not enough GPUs
    assert matches(acc.H100(count=0.5), "H100", 80, 1)  # a fraction of one
    assert matches(acc.H100(), "H100", None, 1)  # unknown memory is not held against it
    assert not matches(acc.A100(), "A100", 16, 1)  # no A100 variant is near 16GB
    assert matches(acc.A100(memory="40GB"), "NVIDIA A100-SXM4-40GB")  # memory read from the name
    assert not matches(acc.A100(memory="40GB"), "NVIDIA A100-SXM4-80GB")
    assert matches(acc.GH200(), "NVIDIA GH200 480GB", 96)  # 480GB in the name is CPU memory
    assert matches(acc.H100(form_factor="SXM"), "NVIDIA H100 80GB HBM3", 80)  # form unknown
    assert matches(acc.H100(form_factor="SXM"), "H100", 80, form_factor="sxm")
    assert not matches(acc.H100(form_factor="SXM"), "NVIDIA H100 PCIe", 80)
    assert not matches(acc.H100(form_factor="NVL"), "NVIDIA H100 80GB HBM3", 80)  # NVL is 94GB
    assert matches(acc.H100(mig="3g.40gb", count=2), "H100", 80, 8)
    assert not matches(acc.H100(), "Unknown Accelerator 9000", 80, 8)


def test_matches_tpu_slices_and_custom_accelerators() -> None:
    assert matches(acc.TPUSlice("v5p-8"), "v5p-8")
    assert not matches(acc.TPUSlice("v5p-8"), "v5p-16")
    assert matches(acc.TPUv5p(count=4), "v5p-8")
    assert not matches(acc.TPUv5p(count=8), "v5p-8")
    assert matches(acc.TPUv5e(count=8), "v5litepod-8")
    custom = acc.Custom("My-GPU", memory="48GB", count=2)
    assert matches(custom, "my gpu", 47.5, 2)
    assert not matches(custom, "My-GPU", 24, 2) and not matches(custom, "My-GPU", 48, 1)
    assert not matches(custom, "Other-GPU", 48, 2)


# ---------------------------------------------------------------- select_instance

AWS_LIKE = (
    sky.InstanceCandidate("m5.8xlarge", 32, 128),
    sky.InstanceCandidate("m5.16xlarge", 64, 256),
    sky.InstanceCandidate("g4dn.xlarge", 4, 16, "T4", 1, 16, hourly_price=0.526),
    sky.InstanceCandidate("g4dn.12xlarge", 48, 192, "T4", 4, 16),
    sky.InstanceCandidate("g5.xlarge", 4, 16, "A10G", 1, 24),
    sky.InstanceCandidate("p4d.24xlarge", 96, 1152, "A100", 8, 40),
    sky.InstanceCandidate("p4de.24xlarge", 96, 1152, "A100", 8, 80),
    sky.InstanceCandidate("p5.48xlarge", 192, 2048, "H100", 8, 80, "SXM"),
)


def test_select_instance_picks_the_smallest_that_fits() -> None:
    assert sky.select_instance(AWS_LIKE, accelerator="T4").name == "g4dn.xlarge"
    assert sky.select_instance(AWS_LIKE, accelerator="T4:2").name == "g4dn.12xlarge"
    assert sky.select_instance(AWS_LIKE, accelerator="T4", cpu=8).name == "g4dn.12xlarge"
    assert sky.select_instance(AWS_LIKE, accelerator="A100-40GB").name == "p4d.24xlarge"
    assert sky.select_instance(AWS_LIKE, accelerator=acc.A100()).name == "p4de.24xlarge"
    assert sky.select_instance(AWS_LIKE, accelerator="H100-SXM:8", memory="2048GB").name == "p5.48xlarge"
    assert sky.select_instance(AWS_LIKE, cpu=32, memory="128GB").name == "m5.8xlarge"
    assert sky.select_instance(AWS_LIKE, cpu=33).name == "m5.16xlarge"
    assert sky.select_instance(AWS_LIKE, memory=200).name == "m5.16xlarge"
    assert sky.select_instance(AWS_LIKE).name == "m5.8xlarge"  # fewest accelerators first
    assert sky.select_instance(AWS_LIKE[2:5]).name == "g4dn.xlarge"  # then vCPUs, memory, price


def test_select_instance_says_what_did_not_fit() -> None:
    with pytest.raises(ValueError) as error:
        sky.select_instance(AWS_LIKE, accelerator="H100", cpu=256)
    assert "1x H100 80GB, >= 256 vCPUs" in str(error.value) and "p5.48xlarge" in str(error.value)
    with pytest.raises(ValueError, match=r"select_instance.memory='lots'"):
        sky.select_instance(AWS_LIKE, memory="lots")
    with pytest.raises(ValueError, match=r"select_instance.cpu=0"):
        sky.select_instance(AWS_LIKE, cpu=0)
    with pytest.raises(ValueError, match=r"did you mean H100"):
        sky.select_instance(AWS_LIKE, accelerator="H1000")
    with pytest.raises(TypeError, match="InstanceCandidate records"):
        sky.select_instance([{"name": "p5.48xlarge"}])
    with pytest.raises(ValueError, match=r"InstanceCandidate.vcpus=-1"):
        sky.InstanceCandidate("x", -1, 1)


# ---------------------------------------------------------------- docs


def test_docs_catalog_tables_match_the_data() -> None:
    path = Path(__file__).resolve().parents[2] / "scripts" / "accelerator_docs.py"
    loader = importlib.util.spec_from_file_location("accelerator_docs", path)
    assert loader is not None and loader.loader is not None
    script = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(script)
    page = script.PAGE.read_text()
    assert script.rewritten(page) == page, "docs/accelerators.md is stale: run scripts/accelerator_docs.py"
    assert all(f"`{model.name}()`" in page for model in CATALOG)
