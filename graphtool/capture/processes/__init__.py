"""``graphtool lint``'s child processes: running jobs in children, each with its timeout (:mod:`.children`),
the job and result that cross the process boundary (:mod:`.lint_job`), and the worker a child runs (:mod:`.lint_worker`)."""
