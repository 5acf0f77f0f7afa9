"""Redaction: no configured secret value, in any spelling, ever reaches the Ledger.

`secrets` reads the secrets flightlog is configured with, `encoded_forms` every spelling a value takes
on the wire, `search` finds and replaces them all, `redact` applies it to a record, `stream` to a body
arriving chunk by chunk.
"""
