"""The HTTP wire: exact head bytes (`heads`), which answers stream (`streaming`), the client side of
a connection whose client left while its answer arrived (`departures`), the records the capture
hooks build from a flow (`flow_records`), and the body bytes mitmproxy had read when a buffered answer
failed part-way (`arrived`).

These modules speak bytes and streams. They may use the recording wing's records but never the
door, readback or the hook classes.
"""
