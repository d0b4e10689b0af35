"""Base URLs as people write them, and the TLS trust every request path shares."""

from __future__ import annotations

import base64
import ssl

import pytest

from recall_eval.server_url import api_root, basic_auth_header, is_loopback, server_root, without_userinfo
from recall_eval.transport import ca_bundle_of, tls_verify


@pytest.mark.parametrize(
    ("given", "root"),
    [
        ("http://h:8000", "http://h:8000"),
        ("http://h:8000/", "http://h:8000"),
        ("http://h:8000/v1", "http://h:8000"),
        ("http://h:8000/v1/", "http://h:8000"),
        ("https://gw.example/api/v1", "https://gw.example/api"),
        ("https://gw.example/api/v1//", "https://gw.example/api"),
        ("https://gw.example/v1beta", "https://gw.example/v1beta"),  # only a whole /v1 segment
        (" http://h/V1 ", "http://h"),
    ],
)
def test_server_root_of_every_form(given, root):
    assert server_root(given) == root
    assert api_root(server_root(given)) == root + "/v1"


def test_userinfo_is_sent_as_basic_auth_and_dropped_from_what_is_shown():
    url = "http://us%40er:p%3Ass@h:1/v1"
    assert without_userinfo(url) == "http://h:1/v1"
    assert basic_auth_header(url) == "Basic " + base64.b64encode(b"us@er:p:ss").decode()
    assert basic_auth_header("http://h:1") is None


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.9.9.9", True), ("[::1]", True),
                                                ("localhost", True), ("10.0.0.1", False), ("gpu.internal", False)])  # fmt: skip
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


def test_ca_bundle_order_and_insecure(tmp_path):
    assert ca_bundle_of("/given.pem", {"REQUESTS_CA_BUNDLE": "/env.pem"}) == "/given.pem"
    assert ca_bundle_of(None, {"SSL_CERT_FILE": "/ssl.pem", "REQUESTS_CA_BUNDLE": "/req.pem"}) == "/req.pem"
    assert ca_bundle_of(None, {}) is None
    assert tls_verify(insecure=True, env={"REQUESTS_CA_BUNDLE": "/x.pem"}) is False
    assert tls_verify(env={}) is True
    with pytest.raises(ValueError, match="cannot read the CA bundle"):
        tls_verify(str(tmp_path / "missing.pem"), env={})
    trustme = pytest.importorskip("trustme")
    ca_file = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca_file))
    assert isinstance(tls_verify(env={"REQUESTS_CA_BUNDLE": str(ca_file)}), ssl.SSLContext)
