"""mitmproxy's CA loaded before any port opens.

mitmproxy's `TlsConfig` builds its certificate store (making the CA on a first start) when it is
configured with `confdir` as updated; a `confdir` given to `Options` before the addons exist never
is, so mitmproxy loads it in the `running` hook (its own FIXME), which comes after `setup_servers`
has opened the ports. A connection in between met `certstore` = None in `TlsConfig.request` (every
request asks for its CRL path): an addon error, and mitmproxy's start-up check then stopped the proxy
("'NoneType' object has no attribute 'default_ca'"), cutting the first client. Loading it here,
before `Master.run`, closes that window; `running` loads it again from the files made here.
"""

from __future__ import annotations

from typing import Any


def load_ca_before_listening(master: Any) -> None:
    """Build TlsConfig's certificate store now (an unusable confdir raises mitmproxy's OptionsError)."""
    if (tls := master.addons.get("tlsconfig")) is not None and getattr(tls, "certstore", None) is None:
        tls.configure({"confdir"})
