"""The HTTP wire: exact head bytes (`heads`), HTTP/1 message framing (`framing`), which exchanges
stream (`streaming`), the relay that owns the upstream read of a streamed request (`relay`), the
records the capture hooks build from a flow (`flow_records`), and the body bytes mitmproxy had read
when a buffered answer failed part-way (`arrived`).

These modules speak bytes and sockets. They may use the recording wing's records (the relay hands
what it read to the writer) but never the door, readback or the hook classes.
"""
