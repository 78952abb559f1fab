"""``python -m pnc.workflow STAGE --threads N ARGS``: the one entry point of the workflow's rules
(:mod:`pnc.workflow.commands`)."""

from pnc.workflow.commands import exit_process, main

exit_process(main())
