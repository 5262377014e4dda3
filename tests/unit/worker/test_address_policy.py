"""Which addresses an ``http`` target may reach (SSRF guard): loopback and non-global addresses are
refused unless the deployment switches allow them; every address is judged, an IPv6 address carrying an IPv4
one (mapped, compatible, NAT64, 6to4, Teredo) as that IPv4 address; multicast is refused."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# --- IPv6 forms that carry an IPv4 address, and multicast ----------------------------------------------

EMBEDDED_INTERNAL = [
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
    ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
    ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
    ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 of 169.254.169.254
    ("::10.0.0.1", "private"),  # IPv4-compatible
    ("::127.0.0.1", "loopback"),
    ("::169.254.169.254", "link-local"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo, client 127.0.0.1
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"),  # Teredo, client 10.0.0.1
]
MULTICAST = ["224.0.0.1", "239.255.255.250", "ff02::1", "ff0e::1", "::ffff:224.0.0.1", "64:ff9b::e000:1"]
NOT_PUBLIC_V6 = ["64:ff9b:1::a00:1", "fec0::1", "5f00::1", "2001:db8::1", "100::1"]


@pytest.mark.parametrize(("address", "reason"), EMBEDDED_INTERNAL)
def test_ipv6_forms_embedding_an_internal_ipv4_address_are_judged_as_it(address: str, reason: str) -> None:
    assert AddressPolicy().refusal(address) == reason


@pytest.mark.parametrize("address", MULTICAST)
def test_multicast_is_refused(address: str) -> None:
    assert AddressPolicy().refusal(address) == "multicast"
    assert AddressPolicy(allow_loopback=True).refusal(address) == "multicast"


@pytest.mark.parametrize("address", NOT_PUBLIC_V6)
def test_ipv6_ranges_outside_global_unicast_are_not_public(address: str) -> None:
    assert AddressPolicy().refusal(address) is not None
    assert AddressPolicy(allow_private=True).refusal(address) is None


def _embeddings(v4: ipaddress.IPv4Address) -> list[str]:
    """Every IPv6 spelling of ``v4`` that a packet would carry to ``v4``."""
    n = int(v4)
    return [
        f"::ffff:{v4}",
        str(ipaddress.IPv6Address((0x64FF9B << 96) | n)),  # NAT64 64:ff9b::/96
        str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1)),  # 6to4 2002:AABB:CCDD::1
        *([f"::{v4}"] if n > 1 else []),  # IPv4-compatible (::, ::1 are themselves)
    ]


@settings(max_examples=300, deadline=None)
@given(st.ip_addresses(v=4), st.booleans(), st.booleans())
def test_every_embedding_of_an_ipv4_address_is_judged_like_it(
    v4: ipaddress.IPv4Address, allow_private: bool, allow_loopback: bool
) -> None:
    policy = AddressPolicy(allow_private=allow_private, allow_loopback=allow_loopback)
    expected = policy.refusal(str(v4))
    for address in _embeddings(v4):
        assert policy.refusal(address) == expected, address


@settings(max_examples=300, deadline=None)
@given(st.ip_addresses(v=4))
def test_a_teredo_address_is_refused_at_least_as_its_client(client: ipaddress.IPv4Address) -> None:
    # Teredo 2001:0:SERVER:FLAGS:PORT:CLIENT with the client's bits inverted (RFC 4380)
    teredo = ipaddress.IPv6Address((0x20010000 << 96) | (0x4136E378 << 64) | (int(client) ^ 0xFFFFFFFF))
    assert teredo.teredo is not None and teredo.teredo[1] == client
    for policy in (AddressPolicy(), AddressPolicy(allow_private=True), AddressPolicy(allow_loopback=True)):
        if policy.refusal(str(client)) is not None:
            assert policy.refusal(str(teredo)) == policy.refusal(str(client))
    assert AddressPolicy().refusal(str(teredo)) is not None  # 2001::/32 is not globally reachable itself
