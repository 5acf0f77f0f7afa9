"""One module per area of the command line; each exposes `register(app)`."""
