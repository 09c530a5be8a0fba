"""The `irpipe` subcommands, one module each: `define_args(parser)` and `main(args) -> int` (see pipeline/cli.py).

Library modules hold no argument parsing; a command module turns arguments into library calls and prints.
"""
