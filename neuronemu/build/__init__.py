"""The builder: instructions and tiles as the tracer makes them, their dependencies, device
loops and cores, replayed iterations (by neuronemu.replay.repeats), SBUF/PSUM allocation,
spills and PSUM rules."""
