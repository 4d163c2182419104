"""The judge wing: what a run is judged against (`against`: a reference file's figures for its
hardware, else the host's previous runs, and its history's recent change points), asked by
every judging command through registry.against; the run judge (`run`: a run's headlines
against their ceilings and a reference, and any figure above its ceiling, its rules stated at
its top); and the peers judge (`peers`: a member of a fleet against the others, figure by
figure), which the cluster verdict (nodes, links) and the GPU family (a GPU among its
siblings) both apply. Every judge also gives its answers as the one judgement record,
`results.judgement.Judgement`, as do a history's change points and the health tier's rules;
the records of a run's verdict are `analysis/verdict.py`'s."""
