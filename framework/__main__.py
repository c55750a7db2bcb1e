"""``python -m gradgen.framework``: the ``gradgen`` command."""
from .tools.cli import main

raise SystemExit(main())
