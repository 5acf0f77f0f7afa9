"""mitmproxy addons, the boundary: capture, redact, dispatch, own routes. Imports storage and catalog."""
