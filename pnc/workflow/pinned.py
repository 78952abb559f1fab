"""Run any command pinned to ``--threads`` CPUs: ``python -m pnc.workflow.pinned --threads N -- CMD``.

Used for the data stages, whose command-line tools are not JAX entry points of their own: the CPUs
are claimed as in :func:`pnc.workflow.limit_threads` and the claim (its lock files) is handed on to
``CMD``, which replaces this process.
"""

from __future__ import annotations

import os

from pnc.workflow import _HELD_LOCKS, limit_threads, parser


def main(argv: list[str] | None = None) -> None:
    p = parser("Run a command on --threads CPUs.")
    p.add_argument("command", nargs="+", help="the command (after --)")
    args = p.parse_args(argv)
    limit_threads(args.threads)
    for fd in _HELD_LOCKS:
        os.set_inheritable(fd, True)
    os.execvp(args.command[0], args.command)


if __name__ == "__main__":
    main()
