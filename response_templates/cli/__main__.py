"""`python -m response_templates.cli`: the same as the `response-templates` command."""

import sys

from . import main

sys.exit(main())
