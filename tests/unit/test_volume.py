"""sky.Volume and sky.S3Volume: validation on construction, with messages naming the
field, the value and the fix."""

from __future__ import annotations

import pickle

import pytest

import skyward as sky


def test_defaults_and_normalised_mount() -> None:
    volume = sky.Volume(bucket="my-data", mount="/data/")
    assert volume == sky.Volume(bucket="my-data", mount="/data", prefix="", read_only=True)
    assert volume.storage is None
    assert sky.Volume(bucket="b.c-d", mount="//mnt//./x/../y").mount == "/mnt/y"
    assert pickle.loads(pickle.dumps(volume)) == volume


@pytest.mark.parametrize(
    "mount",
    ["/", "/opt", "/opt/skyward", "/root", "/tmp", "/tmp/", "/opt/skyward/", "//", "/root/.",
     "/data/..", "/opt/x/../skyward", "//tmp", "/./opt"],
)
def test_forbidden_mount_points_are_refused_in_any_spelling(mount: str) -> None:
    with pytest.raises(ValueError, match=r"Volume\.mount=.*would hide files") as caught:
        sky.Volume(bucket="b-1", mount=mount)
    assert "'/data'" in str(caught.value)  # says what to use instead


def test_mount_points_below_forbidden_ones_are_allowed() -> None:
    assert sky.Volume(bucket="b-1", mount="/tmp/work").mount == "/tmp/work"
    assert sky.Volume(bucket="b-1", mount="/opt/data").mount == "/opt/data"


@pytest.mark.parametrize("mount", ["data", "./data", "~/data", ""])
def test_relative_mount_points_are_refused(mount: str) -> None:
    with pytest.raises(ValueError, match=r"Volume\.mount=.*absolute path"):
        sky.Volume(bucket="b-1", mount=mount)


@pytest.mark.parametrize(
    "bucket",
    ["", "ab", "a" * 64, "My-Bucket", "under_score", "-start", "end-", "two..dots", "a.-b",
     "a-.b", "192.168.1.1", "xn--punycode", "sthree-x", "x-s3alias", "x--ol-s3", "sp ace"],
)
def test_bad_bucket_names_are_refused_with_the_rules(bucket: str) -> None:
    with pytest.raises(ValueError, match=r"Volume\.bucket=.*S3 bucket names are 3-63"):
        sky.Volume(bucket=bucket, mount="/data")


def test_good_bucket_names() -> None:
    for bucket in ("abc", "a" * 63, "my.data-2024", "0-9"):
        assert sky.Volume(bucket=bucket, mount="/data").bucket == bucket


@pytest.mark.parametrize(
    ("fields", "named", "fix"),
    [
        ({"bucket": 7}, "Volume.bucket=7", "must be a str, got int"),
        ({"mount": b"/data"}, "Volume.mount=b'/data'", "must be an absolute path str"),
        ({"prefix": None}, "Volume.prefix=None", "must be a str folder"),
        ({"read_only": "yes"}, "Volume.read_only='yes'", "True or False"),
        ({"storage": "s3"}, "Volume.storage='s3'", "must be a sky.Storage"),
    ],
)
def test_bad_types_name_the_field_value_and_fix(
    fields: dict[str, object], named: str, fix: str
) -> None:
    arguments: dict[str, object] = {"bucket": "b-1", "mount": "/data", **fields}
    with pytest.raises(ValueError) as caught:
        sky.Volume(**arguments)  # type: ignore[arg-type]
    assert named in str(caught.value) and fix in str(caught.value)


def test_storage_override() -> None:
    storage = sky.storage.R2(account_id="acc", access_key="k", secret_key="s")
    assert sky.Volume(bucket="b-1", mount="/data", storage=storage).storage is storage


def test_s3_volume_builds_a_volume_from_the_older_field_names() -> None:
    volume = sky.S3Volume(mount_path="/data", bucket="my-bucket", prefix="datasets/",
                          read_only=False)
    assert volume == sky.Volume(bucket="my-bucket", mount="/data", prefix="datasets/",
                                read_only=False)
    assert sky.S3Volume("/data/", "my-bucket") == sky.Volume(bucket="my-bucket", mount="/data")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"mount_path": "/tmp"}, "S3Volume.mount_path='/tmp'"),
        ({"mount_path": "data"}, "S3Volume.mount_path='data'"),
        ({"bucket": "Bad_Name"}, "S3Volume.bucket='Bad_Name'"),
        ({"prefix": 3}, "S3Volume.prefix=3"),
        ({"read_only": 1}, "S3Volume.read_only=1"),
    ],
)
def test_s3_volume_errors_name_its_own_fields(fields: dict[str, object], named: str) -> None:
    arguments: dict[str, object] = {"mount_path": "/data", "bucket": "b-1", **fields}
    with pytest.raises(ValueError, match="is not valid") as caught:
        sky.S3Volume(**arguments)  # type: ignore[arg-type]
    assert named in str(caught.value)
