"""One module per ``hofcat`` subcommand (see ``runner/cli.py`` for the contract)."""
