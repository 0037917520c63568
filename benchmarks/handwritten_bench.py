"""The hand-written way of doing what `graphtool bench` does, as a user would write it without graphtool.

    python benchmarks/handwritten_bench.py MODEL ITERS [--compile MODE|BACKEND|none] [--cudagraphs]

Same work as `graphtool bench MODEL --iters ITERS [--compile ...] [--cudagraphs]` with its defaults
(10 warm-up iterations, 3 timed repeats, 4 rotating input sets, each mode checked against eager):
eager; torch.compile; with --cudagraphs, the eager forward captured into a CUDA graph (side-stream
warm-up, capture, fresh inputs copied in, replay) and mode="reduce-overhead". CUDA events on a GPU,
the host clock on CPU. Prints each mode's median per-iteration milliseconds. What graphtool adds on
top (the CUDA-graph verdict, the table, JSON) is its overhead; benchmarks/bench_bench.py times the
two side by side.
"""
import runpy
import statistics
import sys
import time

import torch

path, iters = sys.argv[1], int(sys.argv[2])
compile_mode = sys.argv[sys.argv.index("--compile") + 1] if "--compile" in sys.argv else "default"
cudagraphs = "--cudagraphs" in sys.argv
warmup, repeat = 10, 3
cuda = torch.cuda.is_available()

model, (x,) = runpy.run_path(path)["get_model_and_inputs"]()[:2]
device = "cuda" if cuda else "cpu"
model, x = model.to(device), x.to(device)
inputs = [x] + [torch.randn_like(x) for _ in range(3)]


def per_iteration_ms(fn) -> float:
    for i in range(warmup):
        fn(i)
    samples = []
    for _ in range(repeat):
        if cuda:
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            t0 = time.perf_counter()
        for i in range(iters):
            fn(i)
        if cuda:
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / iters)
        else:
            samples.append((time.perf_counter() - t0) * 1000 / iters)
    return statistics.median(samples)


def compiled(mode):
    if mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        return torch.compile(model) if mode == "default" else torch.compile(model, mode=mode)
    return torch.compile(model, backend=mode)


def time_compiled(mode):
    torch._dynamo.reset()
    fn = compiled(mode)
    assert torch.allclose(fn(inputs[0]), reference, rtol=1e-3, atol=1e-3)
    print(f"compile[{mode}]", per_iteration_ms(lambda i: fn(inputs[i % 4])))


with torch.no_grad():
    reference = model(inputs[0])
    print("eager", per_iteration_ms(lambda i: model(inputs[i % 4])))
    if compile_mode != "none":
        time_compiled(compile_mode)
    if cudagraphs:
        static = inputs[0].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static)
        graph.replay()
        assert torch.allclose(static_out, reference, rtol=1e-3, atol=1e-3)

        def replay(i):
            static.copy_(inputs[i % 4])
            graph.replay()

        print("cudagraph replay", per_iteration_ms(replay))
        if compile_mode != "reduce-overhead":
            time_compiled("reduce-overhead")
