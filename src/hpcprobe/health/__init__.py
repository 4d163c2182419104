"""The health wing: what `check` decides beyond the judgement of figures and state
(analysis/health.py): which figures are measured again before a node fails (`retest`), the
error counters' baseline (`baseline`), every fault read without a figure (`faults`) and what a
node's outcome does to it in Slurm (`drain`). Its command, commands/check.py, is a parser and
a handler."""
