"""The judge wing: what a run is judged against (`against`: a reference file's figures for its
hardware, else the host's previous runs, and its history's recent change points). The commands
that judge (run, show, report, compare, export, check, cluster report) ask it through
registry.against; the rules of a mark stay in analysis/verdict.py for now."""
