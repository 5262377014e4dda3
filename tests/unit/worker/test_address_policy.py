"""Which addresses an ``http`` target may reach (SSRF guard): loopback and non-global addresses are
refused unless the deployment switches allow them; every address is judged, IPv4-mapped as IPv4."""

from __future__ import annotations

import pytest

from jobsched.targets.http import AddressPolicy, display_url

PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"]
LOOPBACK = ["127.0.0.1", "127.5.6.7", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::"]
PRIVATE = [
    "10.0.0.1",
    "172.16.3.4",
    "192.168.1.1",
    "169.254.169.254",
    "fe80::1%eth0",
    "fd00:ec2::254",
    "100.64.0.1",
    "::ffff:10.0.0.1",
]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert AddressPolicy().refusal(address) is None


@pytest.mark.parametrize("address", LOOPBACK)
def test_loopback_only_with_its_switch(address: str) -> None:
    assert AddressPolicy().refusal(address) == "loopback"
    assert AddressPolicy(allow_private=True).refusal(address) == "loopback"
    assert AddressPolicy(allow_loopback=True).refusal(address) is None


@pytest.mark.parametrize("address", PRIVATE)
def test_private_and_link_local_only_with_their_switch(address: str) -> None:
    assert AddressPolicy().refusal(address) in {"private", "link-local", "not a public address"}
    assert AddressPolicy(allow_loopback=True).refusal(address) is not None
    assert AddressPolicy(allow_private=True).refusal(address) is None


def test_the_metadata_address_is_named_link_local() -> None:
    assert AddressPolicy().refusal("169.254.169.254") == "link-local"


def test_display_url_drops_query_and_credentials() -> None:
    assert (
        display_url("https://user:pw@api.example.com:8443/hook?token=s3cret#x")
        == "https://api.example.com:8443/hook"
    )
    assert display_url("http://[::1]:8080/a") == "http://[::1]:8080/a"
