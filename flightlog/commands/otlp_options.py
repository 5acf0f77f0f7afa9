"""The proxy's options for the live OTLP stream (`readback.otlp_live`)."""

from __future__ import annotations

from typing import Annotated

import typer

OtlpEndpointOpt = Annotated[
    str | None,
    typer.Option(
        help="Stream spans (a trace per agent run, GenAI conventions) to this OTLP/HTTP receiver as "
        "the Ledger commits, e.g. http://127.0.0.1:6006 (or .../v1/traces). A receiver that is down "
        "costs one line; the proxy goes on.",
    ),
]
OtlpContentOpt = Annotated[
    bool,
    typer.Option(
        "--otlp-content",
        help="With --otlp-endpoint: prompts, answers and tool arguments (as recorded, redacted) "
        "as span events.",
    ),
]
