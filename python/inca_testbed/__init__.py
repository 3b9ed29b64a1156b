"""inca's multi-host testbed on one machine: a star of network namespaces,
and the runs on it (the all-reduce launcher, OLAF training, the reflectors).

    net      the namespaces, links and their shaping (Testbed, LinkShape)
    perf     `testbed.py perf`: switch against Gloo, with the wire's bounds
    olaf     `testbed.py olaf`: OLAF training across the testbed
    reflect  `testbed.py reflect`: the switch namespace's I/O paths
    cli      the command line (scripts/testbed.py, or python3 -m inca_testbed)

Imports run one way: cli imports the runs, the runs import net. docs/testbed.md
describes the testbed.
"""
