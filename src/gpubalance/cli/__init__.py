"""Command-line interface: one thin module per command, registered in :mod:`gpubalance.cli.app`."""
