"""The lattice-QCD Dslash proxy (issue 15, in progress): so far the validated native kernel of
the Wilson / domain-wall hopping term and its Python side (kernel.py). The family record, Grid's
per-node table and comparison point, and the halo exchange come next; nothing registers it yet."""
