"""graphtool's child processes: running jobs in children, each with its timeout (:mod:`.children`); ``graphtool
lint``'s job and result (:mod:`.lint_job`) and the worker its child runs (:mod:`.lint_worker`); ``graphtool
compile``'s job (:mod:`.compile_job`) and worker (:mod:`.compile_worker`)."""
