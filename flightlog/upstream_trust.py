"""The CAs the proxy trusts for its upstreams: the machine's trust store, as the user's other tools
use it, with the bundled list as fallback and `--upstream-ca` added.

mitmproxy checks an upstream's certificate against certifi's bundled list unless told otherwise
(`ssl_verify_upstream_trusted_ca`), so behind a TLS-inspecting network, or with a company CA the
machine trusts, every HTTPS call failed ("self-signed certificate in certificate chain") while curl
and pip on the same machine worked. pip and requests solve it with `truststore`, which hands
Python's `ssl` module to the system's verifier; mitmproxy verifies with pyOpenSSL, which `truststore`
does not reach. On Linux the system's verifier reads the same PEM file OpenSSL does, so the proxy
is given that file: the one `ssl.get_default_verify_paths()` names (`SSL_CERT_FILE` when set, else
the distribution's bundle), then certifi's list (a machine without one still reaches the public
APIs), then the file of `--upstream-ca`, written together into FLIGHTLOG_HOME/mitmproxy/
`upstream-trust-HASH.pem` when the proxy starts. A `--set ssl_verify_upstream_trusted_ca=FILE` given
by hand is used as it is.
"""

from __future__ import annotations

import hashlib
import os
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Final

OPTION: Final = "ssl_verify_upstream_trusted_ca"
BUNDLE: Final = "upstream-trust.pem"


def system_ca_file() -> Path | None:
    """The machine's CA bundle as OpenSSL finds it (`SSL_CERT_FILE` first), if there is one."""
    paths = ssl.get_default_verify_paths()
    for name in (os.environ.get(paths.openssl_cafile_env), paths.cafile, paths.openssl_cafile):
        if name and Path(name).is_file():
            return Path(name)
    return None


def bundled_ca_file() -> Path | None:
    """certifi's list (the fallback mitmproxy uses alone), when installed."""
    try:
        import certifi
    except ImportError:
        return None
    return Path(certifi.where())


def sources(upstream_ca: Path | None) -> list[Path]:
    """The PEM files trusted, in order: the system's, the bundled list, `--upstream-ca`."""
    found = [system_ca_file(), bundled_ca_file(), upstream_ca]
    out: list[Path] = []
    for path in found:
        if path is not None and path.resolve() not in [p.resolve() for p in out]:
            out.append(path)
    return out


def write_bundle(confdir: Path, files: Sequence[Path]) -> Path:
    """`files` joined into one PEM file in `confdir`, named by its content (`upstream-trust-HASH.pem`):
    a proxy started with another `--upstream-ca` on the same home (a sealed command's) writes its
    own file and never changes the one a running proxy reads; written whole, never half."""
    confdir.mkdir(parents=True, exist_ok=True)
    text = b"".join(path.read_bytes().rstrip(b"\n") + b"\n" for path in files)
    digest = hashlib.sha256(text).hexdigest()[:16]
    target = confdir / f"{BUNDLE.removesuffix('.pem')}-{digest}.pem"
    if not target.exists():
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(text)
        partial.replace(target)
    return target


def trust_sets(confdir: Path, given_sets: Sequence[str], upstream_ca: Path | None) -> tuple[str, ...]:
    """The `--set` for the upstream CAs: none when one was given by hand, else the bundle's."""
    if any(item.partition("=")[0] == OPTION for item in given_sets):
        return ()
    return (f"{OPTION}={write_bundle(confdir, sources(upstream_ca))}",)
