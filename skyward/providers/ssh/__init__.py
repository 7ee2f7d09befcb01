"""``sky.SSH``: hosts reached over SSH, bootstrapped from an Image, driven through a head relay."""
