"""Command-line stages of the Snakemake workflows: ``python -m pnc.workflow STAGE --threads N
...``.

Every rule's shell command runs one stage of :data:`pnc.workflow.commands.STAGES`; each stage
parses its arguments, pins its threads (:func:`pnc.runtime.stage.limit_threads`) and calls one
library function. Stages hold no logic of their own. ``python -m pnc.workflow --help`` lists them.
"""

from pnc.runtime.extras import require

require("workflow", ("pandas", "yaml"), "the workflows' entry points (pnc.workflow)")
