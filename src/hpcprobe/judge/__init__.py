"""The judge wing: what a run is judged against (`against`: a reference file's figures for its
hardware, else the host's previous runs, and its history's recent change points), asked by
every judging command through registry.against; and the peers judge (`peers`: a member of a
fleet against the others, figure by figure), which the cluster verdict (nodes, links) and the
GPU family (a GPU among its siblings) both apply. The rules of a run's mark against a ceiling
and a reference stay in analysis/verdict.py for now."""
