"""The builder: instructions and tiles as the tracer makes them, their dependencies, device
loops and cores, replayed iterations, SBUF/PSUM allocation, spills and PSUM rules."""
