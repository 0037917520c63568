"""One function per command, asked of a Session: options in, report dataclasses out, progress through a callback.

A :class:`~graphtool.commands.session.Session` is one model loaded once under its launch; each command module has
``run(session, **options)`` (the Session's method of that name) and a result that renders itself
(:mod:`graphtool.commands.result`). The options of every command are one table (:mod:`graphtool.commands.options`)
that the CLI, the API and the docs read. No command module imports another: a command that needs another's answer
asks the session. ``graphtool.cli`` builds a Session per model from argv, asks, renders and picks the exit code;
``commands.X.X("model.py", **options)`` asks each model (a list of results; bench and render the first model's).

    trace       TraceResult                    mutations   MutationsResult (MutationReport)
    devices     DevicesResult (DeviceReport)   cudagraphs  CudagraphsResult (Verdict)
    memory      MemoryResult (MemoryReport)    shapes      ShapesResult (ShapeReport)
    render      RenderResult                   bench       BenchResult
    lint        LintOutcome                    report      ReportResult
"""
