"""One plain function per command: options in, report dataclasses out, progress through a callback.

``graphtool.cli`` parses options, calls one of these, renders what it returns and picks the exit
code; tests call them directly, without typer. No command module imports another: what two
commands share (finding the models, loading a script, the two kinds of trace) is in
:mod:`graphtool.commands.shared`, lint's baseline file in :mod:`graphtool.commands.baseline`. Each
result renders itself (JSON, summary, terminal view, diagnostics, HTML): :mod:`graphtool.commands.result`.

    trace       trace.trace()            -> list[TraceResult]
    mutations   mutations.mutations()    -> list[MutationsResult]   (MutationReport)
    devices     devices.devices()        -> list[DevicesResult]     (DeviceReport)
    cudagraphs  cudagraphs.cudagraphs()  -> list[CudagraphsResult]  (Verdict)
    render      render.render()          -> RenderResult
    bench       bench.bench()            -> BenchResult
    lint        lint.lint()              -> LintOutcome
    memory      memory.memory()          -> list[MemoryResult]      (MemoryReport)
    report      report.report()          -> list[ReportResult]
"""
