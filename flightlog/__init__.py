"""flightlog: the command line and the settings that wire storage, catalog, addons and tui together."""

__version__ = "0.1.0"
