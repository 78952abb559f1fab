"""``python -m pnc.workflow STAGE --threads N ARGS``: the one entry point of the workflow's rules
(:mod:`pnc.workflow.stages`)."""

from pnc.workflow.stages import main

raise SystemExit(main())
