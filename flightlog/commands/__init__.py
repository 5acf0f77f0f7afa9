"""One module per command group or area of the command line; `flightlog.cli` lists them all."""
