"""`python -m ccogen` runs the command line."""

from ccogen.cli import main

raise SystemExit(main())
