"""Workers shipped as examples: ``textstats`` is the one ``workload demo`` starts.

They ship inside the package so that the demo, and ``workload worker
workload_worker.examples.textstats:worker``, work wherever the package is installed, with no
source checkout (SPEC §18).
"""
