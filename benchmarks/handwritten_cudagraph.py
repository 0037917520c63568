"""The hand-written way of what `graphtool bench --cudagraphs --compile none` times: capture the
eager forward into a CUDA graph, replay it with fresh inputs copied in, time with CUDA events."""
import runpy
import sys

import torch

iters, repeat, warmup = int(sys.argv[2]), 3, 10
model, (x,) = runpy.run_path(sys.argv[1])["get_model_and_inputs"]()
model, x = model.cuda(), x.cuda()
inputs = [torch.randn_like(x) for _ in range(4)]
with torch.no_grad():
    static = x.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(static)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(static)
    for i in range(warmup):
        static.copy_(inputs[i % 4])
        g.replay()
    for _ in range(repeat):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(iters):
            static.copy_(inputs[i % 4])
            g.replay()
        end.record()
        end.synchronize()
        print(start.elapsed_time(end) / iters)
