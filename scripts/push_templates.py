#!/usr/bin/env python3
"""Open Hub pull requests that add the library's verified response templates to model repositories.

Thin wrapper around ``response_templates.authoring.publish`` (also available as ``response-templates push``).
Run with --help for the options; --dry-run shows the changes without writing anything.
"""

import os
import sys

try:
    from response_templates.cli.push import main
except ImportError:  # not installed: run from the source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
    from response_templates.cli.push import main

if __name__ == "__main__":
    sys.exit(main())
