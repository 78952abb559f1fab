"""Statistics, tables and figures of the study's results (``python -m pnc.report``)."""
