"""The `ccogen` command line (`ccogen.cli:main`): one module per subcommand, what they
share in `common`, the parser and dispatch in `main`."""

from ccogen.cli.main import COMMANDS, main

__all__ = ["COMMANDS", "main"]
